"""`/url add|list|remove`: web pages as context (the `urls` layer).

A page is fetched once (`slop_tui.web.fetch_page`: http/https only, private
addresses refused unless `[network] allow_private`), stored in the ledger as
Markdown and sent with every request as the `## URL Context` pair until it is
removed. Adding the same address again fetches it anew.
"""

from __future__ import annotations

from slop_tui.commands.base import (
    TABLE,
    CommandError,
    UsageError,
    command,
    no_args,
    ok,
    one_number,
)
from slop_tui.records import Changed

CAT = "Context & history"
TABLE.default_sub["url"] = "list"


@command(
    "url",
    "add",
    "/url add URL",
    "Fetch a web page and keep it in the context as Markdown (http or https).",
    CAT,
)
async def url_add(ws, args: str):
    from slop_tui.web import FetchError, FetchLimits, fetch_page

    words = args.split()
    if len(words) != 1:
        raise UsageError("one address is needed. Usage: /url add URL")
    url = words[0]
    try:
        page = await fetch_page(url, FetchLimits(allow_private=ws.config.allow_private))
    except FetchError as exc:
        raise CommandError(f"{url} was not added: {exc}.") from None
    stored = await ws.ledger.put_url_page(
        ws.session, url, page.final_url, page.title, page.content, page.content_type
    )
    tokens = ws.ledger.count_tokens(page.content)
    title = f" ({page.title})" if page.title else ""
    return ok(
        f"Added {url}{title}: {tokens:,} tokens, sent with every request until "
        f"/url remove {stored.id}.",
        changed=Changed.FILES,
        data=stored.id,
    )


@command("url", "list", "/url list", "Web pages in the context, with tokens per page.", CAT)
async def url_list(ws, args: str):
    no_args(args, "/url list")
    pages = await ws.ledger.url_pages(ws.session)
    if not pages:
        return ok("No web pages in the context; /url add URL adds one.", data=[])
    lines = ["| # | address | title | tokens |", "|---|---|---|---|"]
    for p in pages:
        title = p.title.replace("|", "\\|")
        lines.append(f"| {p.id} | {p.url} | {title} | {ws.ledger.count_tokens(p.content):,} |")
    return ok("\n".join(lines), data=[p.id for p in pages])


@command(
    "url",
    "remove",
    "/url remove N",
    "Take a web page (its number in /url list) out of the context.",
    CAT,
)
async def url_remove(ws, args: str):
    usage = "/url remove N"
    n = one_number(args, "page number", usage)
    if not await ws.ledger.remove_url_page(ws.session, n):
        raise CommandError(f"there is no page {n}; /url list shows the pages and their numbers.")
    return ok(f"Removed page {n} from the context.", changed=Changed.FILES)
