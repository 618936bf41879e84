"""Web pages as context: a safe fetch (`fetch.py`) and HTML to Markdown (`convert.py`).

Headless; used by `/url add` (the URL context layer) and the `fetch_url` tool.
"""

from slop_tui.web.fetch import FetchError, FetchLimits, Page, check_address, check_url, fetch_page

__all__ = ["FetchError", "FetchLimits", "Page", "check_address", "check_url", "fetch_page"]
