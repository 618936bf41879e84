"""HTML to Markdown: which converter keeps a page's content best (the choice behind
`slop_tui/web/convert.py`).

    python bench/html_markdown.py [--runs N]

Needs `trafilatura`, `markdownify`, `html2text` and `beautifulsoup4` installed
(a separate venv is fine: only the winner is a dependency of slop-tui).

On the saved pages in bench/data/pages (an mdBook chapter, an mdBook page with
many code blocks, a Sphinx page), the main content (the `<main>` element, or
Sphinx's `role="main"`) is the reference:

- `recall`: share of its paragraphs, list items and headings (first 60
  characters, words only) found in the output;
- `size`: output words / main-content words (1.0: nothing added; above:
  navigation and boilerplate kept; below: content lost);
- `code`: fenced or indented code blocks in the output / `<pre>` blocks in
  the main content;
- `ms`: median time of `--runs` conversions (range in brackets).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from bs4 import BeautifulSoup

PAGES = Path(__file__).parent / "data" / "pages"
_WORDS = re.compile(r"[a-z0-9]+")


def words(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


def reference(html: str) -> tuple[list[str], int, int]:
    soup = BeautifulSoup(html, "html.parser")
    main = soup.find("main") or soup.find(attrs={"role": "main"}) or soup.body
    items = [words(el.get_text(" "))[:60] for el in main.find_all(["p", "li", "h1", "h2", "h3"])]
    items = [i for i in items if len(i) > 20]
    return items, len(words(main.get_text(" ")).split()), len(main.find_all("pre"))


def trafilatura_md(html: str) -> str:
    import trafilatura

    return (
        trafilatura.extract(
            html,
            output_format="markdown",
            include_tables=True,
            include_links=False,
            favor_recall=True,
        )
        or ""
    )


def markdownify_md(html: str) -> str:
    from markdownify import markdownify

    return markdownify(html, heading_style="ATX", strip=["script", "style"])


def markdownify_main_md(html: str) -> str:
    """markdownify on the page's main element (what slop-tui does)."""
    from markdownify import markdownify

    soup = BeautifulSoup(html, "html.parser")
    main = (
        soup.find("main") or soup.find(attrs={"role": "main"}) or soup.find("article") or soup.body
    )
    return markdownify(str(main), heading_style="ATX", strip=["script", "style"])


def html2text_md(html: str) -> str:
    import html2text

    h = html2text.HTML2Text()
    h.body_width = 0
    h.ignore_images = True
    return h.handle(html)


CONVERTERS = {
    "trafilatura (Apache-2.0)": trafilatura_md,
    "markdownify (MIT), whole page": markdownify_md,
    "markdownify (MIT), main element": markdownify_main_md,
    "html2text (GPL-3.0)": html2text_md,
}


def code_blocks(md: str) -> int:
    fenced = len(re.findall(r"^```", md, re.M)) // 2
    return fenced


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print("| page | converter | recall | size | code | ms |")
    print("|---|---|---:|---:|---:|---:|")
    for page in sorted(PAGES.glob("*.html")):
        html = page.read_text(encoding="utf-8")
        items, n_words, pres = reference(html)
        for name, fn in CONVERTERS.items():
            times = []
            for _ in range(args.runs):
                t = time.perf_counter()
                md = fn(html)
                times.append((time.perf_counter() - t) * 1000)
            out = words(md)
            recall = sum(1 for i in items if i in out) / max(1, len(items))
            size = len(out.split()) / max(1, n_words)
            code = f"{code_blocks(md)}/{pres}"
            ms = f"{statistics.median(times):.0f} [{min(times):.0f}-{max(times):.0f}]"
            print(f"| {page.stem} | {name} | {recall:.2f} | {size:.2f} | {code} | {ms} |")


if __name__ == "__main__":
    main()
