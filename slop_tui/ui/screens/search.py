"""Search the history of every session and jump to a hit.

Typing searches after a short pause (Enter searches at once); the ledger
runs a case-insensitive substring match, newest first. Choosing a hit
dismisses with (session, group id) so the app can switch session and
scroll to the group; the group id is None for a row outside any group.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from slop_tui.records import HistoryHit
from slop_tui.ui.screens.base import Dialog, DialogBox, PickList, neutralise, plain

SearchResult = tuple[str, int | None]


def hit_line(hit: HistoryHit, query: str) -> Text:
    """One result: session, group, role, then the snippet with the match highlighted."""
    line = Text(no_wrap=True, overflow="ellipsis", end="")
    line.append_text(plain(f"{hit.session[:18]:<18} ", "bold"))
    group = f"#{hit.group_id}" if hit.group_id is not None else "-"
    line.append(f"{group:>7} {hit.role:<9} ", style="dim")
    snippet = plain(hit.snippet)
    if query:
        snippet.highlight_words([neutralise(query)], "bold reverse", case_sensitive=False)
    line.append_text(snippet)
    return line


class SearchScreen(Dialog[SearchResult | None]):
    """An Input and the hits across all sessions; Enter on a hit jumps, Escape cancels."""

    DEFAULT_CSS = """
    SearchScreen > #dialog { width: 120; height: 90%; }
    SearchScreen #hits { height: 1fr; max-height: 100%; margin-top: 1; }
    SearchScreen #search-status { color: $text-muted; height: 1; }
    """
    AUTO_FOCUS = "#query"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", show=False, id="search_cancel"),
        Binding("down", "focus_hits", "Results", show=False, id="search_results"),
        Binding("ctrl+f", "focus_query", "Search field", id="search_focus_query"),
    ]

    def __init__(self, ws, *, limit: int = 100, debounce: float = 0.3, query: str = "") -> None:
        super().__init__()
        self.ws = ws
        self.limit = limit
        self.debounce = debounce
        self.initial_query = query
        self.hits: list[HistoryHit] = []
        self.searched: str | None = None  # the text of the last finished search
        self._debounce_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog"):
            yield Static("Search the history of every session", classes="dialog-title")
            yield Input(self.initial_query, id="query", placeholder="text to find")
            yield Static(
                "Type to search; Enter searches now, ↓ goes to the results.", id="search-status"
            )
            yield PickList(id="hits")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Jump (enter)", id="jump", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        if self.initial_query:
            self.run_search(self.initial_query)

    def _stop_timer(self) -> None:
        if self._debounce_timer is not None:
            self._debounce_timer.stop()
            self._debounce_timer = None

    @on(Input.Changed, "#query")
    def _changed(self, event: Input.Changed) -> None:
        self._stop_timer()
        value = event.value
        self._debounce_timer = self.set_timer(self.debounce, lambda: self.run_search(value))

    @on(Input.Submitted, "#query")
    def _submitted(self, event: Input.Submitted) -> None:
        self._stop_timer()
        self.run_search(event.value, focus_hits=True)

    @work(exclusive=True, group="history-search")
    async def run_search(self, text: str, focus_hits: bool = False) -> None:
        """Search the ledger and show the hits (a newer search cancels this one)."""
        query = text.strip()
        hits = await self.ws.ledger.search_history(query, limit=self.limit) if query else []
        self.hits = hits
        picker = self.query_one("#hits", PickList)
        picker.set_options(Option(hit_line(h, query), id=str(i)) for i, h in enumerate(hits))
        status = self.query_one("#search-status", Static)
        if not query:
            status.update("Type to search; Enter searches now, ↓ goes to the results.")
        elif not hits:
            status.update(plain(f"No message contains '{query}'."))
        else:
            sessions = len({h.session for h in hits})
            more = f" (the newest {self.limit})" if len(hits) >= self.limit else ""
            status.update(
                f"{len(hits)} hit{'s' if len(hits) != 1 else ''}{more} in {sessions} "
                f"session{'s' if sessions != 1 else ''}; Enter on a hit jumps to its group."
            )
        if hits:
            picker.highlighted = 0
            if focus_hits:
                picker.focus()
        self.searched = query

    @on(OptionList.OptionSelected, "#hits")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self._jump(event.option_index)

    @on(Button.Pressed, "#jump")
    def _jump_pressed(self) -> None:
        index = self.query_one("#hits", PickList).highlighted
        if index is not None:
            self._jump(index)

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def _jump(self, index: int) -> None:
        if 0 <= index < len(self.hits):
            hit = self.hits[index]
            self.dismiss((hit.session, hit.group_id))

    def action_focus_hits(self) -> None:
        picker = self.query_one("#hits", PickList)
        if picker.option_count and not picker.has_focus:
            picker.focus()

    def action_focus_query(self) -> None:
        self.query_one("#query", Input).focus()

    def action_cancel(self) -> None:
        self._stop_timer()
        self.dismiss(None)


__all__ = ["SearchResult", "SearchScreen", "hit_line"]
