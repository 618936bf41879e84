"""F1 help: every binding (by the widget or screen it belongs to) and every slash command.

Built from the bindings themselves, with the keymap applied, so the screen
cannot drift from what the keys do. A binding shows up when it has an `id`
(the name `[keymap]` in config.toml remaps it by) and a description.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from rich.markdown import Markdown as RichMarkdown
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import Static

HelpRow = tuple[str, str, str]  # (binding id, key display, description)
HelpRows = Mapping[str, Sequence[HelpRow]]  # group title -> rows


def _class_bindings(cls: type) -> list[list[Binding]]:
    """A DOM class's bindings by id (one entry per key of "a,b"); subclasses win per id."""
    found: dict[str, list[Binding]] = {}
    for base in reversed(cls.__mro__):
        raw = base.__dict__.get("BINDINGS")
        if not raw:
            continue
        mine: dict[str, list[Binding]] = {}
        for b in Binding.make_bindings(raw):
            mine.setdefault(b.id or f"{b.key}:{b.action}", []).append(b)
        found.update(mine)
    return list(found.values())


# What each part of the screen is called in the help; a class may set HELP_TITLE.
HELP_TITLES = {
    "GroupList": "Groups pane",
    "SessionList": "Sessions pane",
    "ConversationView": "Conversation",
    "GroupBlock": "A group in the conversation",
    "AnswerBlock": "An answer in the conversation",
    "LiveAnswer": "The answer being written",
    "ToolBlock": "A tool call in the conversation",
    "PromptArea": "Prompt",
    "StatePane": "STATE pane",
    "ScratchpadEditor": "Scratchpad",
    "ContextPreview": "Context preview",
    "ApprovalScreen": "Tool approval dialog",
    "ConfirmScreen": "Confirmation dialog",
    "ProviderScreen": "Provider dialog (F4)",
    "SessionScreen": "Sessions dialog (F5)",
    "SearchScreen": "Search dialog (F6)",
}


def _group_title(cls: type) -> str:
    """A human name: HELP_TITLE, the table above, else the class name as words."""
    title = getattr(cls, "HELP_TITLE", None) or HELP_TITLES.get(cls.__name__)
    if title:
        return title
    words = re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", cls.__name__)
    return " ".join([words[0], *(w.lower() for w in words[1:])]) if words else cls.__name__


def binding_rows(
    app: App,
    nodes: Iterable[DOMNode | type] | None = None,
    *,
    keymap: Mapping[str, str] | None = None,
) -> dict[str, list[HelpRow]]:
    """Rows for HelpScreen from the app, a screen and its widgets, or DOM classes.

    `nodes` defaults to the app, its current screen and every widget on it,
    then the dialog screens (so their keys are listed before they are open).
    A class's `HELP_TITLE` names its group (else the class name; the app is
    "Everywhere"). Keys come from `keymap` (default: the app's keymap), so a
    remapped binding shows its new key.
    """
    from slop_tui.ui.screens.dialogs import (
        ApprovalScreen,
        ConfirmScreen,
        ProviderScreen,
        SessionScreen,
    )
    from slop_tui.ui.screens.search import SearchScreen

    if keymap is None:
        keymap = getattr(app, "_keymap", {}) or {}
    if nodes is None:
        screen = app.screen
        nodes = [app, screen, *screen.walk_children(with_self=False)]
        nodes += [ApprovalScreen, ConfirmScreen, ProviderScreen, SessionScreen, SearchScreen]
    groups: dict[str, list[HelpRow]] = {}
    seen_classes: set[type] = set()
    seen_ids: set[str] = set()
    for node in nodes:
        cls = node if isinstance(node, type) else type(node)
        if cls in seen_classes or issubclass(cls, HelpScreen):
            continue
        seen_classes.add(cls)
        title = "Everywhere" if issubclass(cls, App) else _group_title(cls)
        for same in _class_bindings(cls):
            b = same[0]
            if not b.id or not b.description or b.id in seen_ids or b.system:
                continue
            seen_ids.add(b.id)
            remapped = keymap.get(b.id)
            if remapped:
                keys = [b.with_key(k.strip()) for k in remapped.split(",") if k.strip()]
            else:
                keys = same
            shown = " / ".join(app.get_key_display(k) for k in keys)
            groups.setdefault(title, []).append((b.id, shown, b.description))
    return groups


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    if not text:
        return ""
    tick = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{tick}{pad}{_cell(text)}{pad}{tick}"


def help_document(rows: HelpRows, commands_markdown: str | None = None) -> str:
    """The help screen's Markdown: one key table per group, then the slash commands."""
    lines = ["# Keys", ""]
    if not rows:
        lines += ["*(no bindings)*", ""]
    for title, group in rows.items():
        lines += [f"## {_cell(title)}", "", "| key | what it does | keymap id |", "|---|---|---|"]
        for binding_id, key, description in group:
            lines.append(f"| {_code(key)} | {_cell(description)} | {_code(binding_id)} |")
        lines.append("")
    if commands_markdown is None:
        from slop_tui.commands import help_markdown

        commands_markdown = help_markdown(heading_level=1)
    body = commands_markdown.split("\n", 1)
    if body and body[0].lstrip("#").strip() == "Commands":
        commands_markdown = body[1] if len(body) > 1 else ""
    lines += ["# Slash commands", "", commands_markdown.strip(), ""]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    """Keys and slash commands, scrollable; Escape, F1 or q closes."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #help-box {
        width: 110; max-width: 95%; height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #help-title { text-style: bold; padding: 0 1; background: $panel; }
    """
    AUTO_FOCUS = "#help-box"
    BINDINGS = [
        Binding("escape", "close", "Close", show=False, id="help_close"),
        Binding("f1", "close", "Close help", id="help_close_f1"),
        Binding("q", "close", "Close", show=False, id="help_close_q"),
    ]

    def __init__(
        self, rows: HelpRows | Sequence[HelpRow], commands_markdown: str | None = None
    ) -> None:
        super().__init__()
        # A flat list (e.g. keymap.binding_help_rows: the keys active now) is one group.
        self.rows = rows if isinstance(rows, Mapping) else {"Keys active now": list(rows)}
        self.document = help_document(self.rows, commands_markdown)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static("Help · Escape or F1 closes", id="help-title")
            # One Static holding rich's Markdown renders in milliseconds; Textual's
            # Markdown widget mounts a widget per block and took over a second here.
            yield Static(RichMarkdown(self.document, hyperlinks=False), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)


__all__ = ["HelpRow", "HelpRows", "HelpScreen", "binding_rows", "help_document"]
