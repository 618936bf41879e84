"""HTML to Markdown for URL context.

markdownify (MIT) over the page's main element (`<main>`, `role="main"`,
`<article>`, else `<body>`), with headings as `#` lines and `<pre>` blocks as
fenced code. Measured on saved documentation pages (bench/html_markdown.py,
bench/results/context_sources.md), it kept 98-100 % of the main content's
paragraphs and every code block, adding 5-7 % of text; trafilatura lost 69 %
of a Sphinx page and a third of an mdBook page's code blocks, and html2text
(GPL-3.0, which this project does not take on) kept no code block fenced.
"""

from __future__ import annotations

import re

_DROP = ("script", "style", "noscript", "template", "svg", "iframe", "form", "button", "nav")
_BLANKS = re.compile(r"\n{3,}")


def html_to_markdown(html: str) -> tuple[str, str]:
    """(title, Markdown) of an HTML page."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = " ".join(soup.title.get_text(" ").split()) if soup.title else ""
    for tag in soup.find_all(_DROP):
        tag.decompose()
    main = (
        soup.find("main")
        or soup.find(attrs={"role": "main"})
        or soup.find("article")
        or soup.body
        or soup
    )
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(main)
    return title, _BLANKS.sub("\n\n", text).strip() + "\n"
