"""The right pane's anchors: the STATE (rendered, editable) and the scratchpad editor.

Both widgets keep what the user typed above everything else. The scratchpad
saves itself after a short pause; when the model rewrites the scratchpad
while the user has unsaved edits, the user's text stays on screen and a
notice offers the model's version instead of overwriting anything.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static, TextArea

from slop_tui.ui.text import keep_lines, neutralise
from slop_tui.ui.widgets.blocks import RenderedLines, markdown_lines, markdown_look
from slop_tui.ui.widgets.editor import SafeTextArea

SCRATCHPAD_DEBOUNCE = 0.8  # seconds of quiet before the scratchpad is saved
CONFLICT_NOTICE = (
    "the model updated the scratchpad; press ctrl+r to load its version, "
    "or keep typing to overwrite it"
)
EMPTY_STATE = "*(no STATE yet — press e to write one)*"


def _same(a: str, b: str) -> bool:
    # `/session scratchpad set` stores the text stripped; that is not a change.
    return a == b or a.strip() == b.strip()


def _replace_all(area: TextArea, text: str) -> None:
    """Replace the text as one undoable edit, keeping the cursor where it was if possible."""
    row, column = area.cursor_location
    area.replace(text, (0, 0), area.document.end, maintain_selection_offset=False)
    last = area.document.line_count - 1
    row = min(row, last)
    area.cursor_location = (row, min(column, len(area.document[row])))


def _state_view(text: str) -> str:
    """The STATE as the pane draws it: the model wrote it, so controls are neutralised;
    each line kept on its own row (Goal:, Context:, ...); its own `### STATE` heading
    left out (the pane's title says it)."""
    lines = neutralise(text).splitlines()
    if lines and lines[0].lstrip("#").strip().upper() == "STATE" and lines[0].startswith("#"):
        lines = lines[1:]
    return keep_lines("\n".join(lines).strip("\n")) or EMPTY_STATE


# What a line of plain text may hold: with these alone Markdown draws it as written.
_PLAIN_MARKS = frozenset(" ,.:;'\"?/()%@=+-")


def _plain_paragraphs(source: str) -> list[str] | None:
    """`source` (a `_state_view`) as its paragraphs when Markdown would draw it as
    written (the `EMPTY_STATE` notice, or lines that start with a letter, hold only
    letters, digits, spaces and `_PLAIN_MARKS`, each ending in the hard break
    `keep_lines` adds, paragraphs one blank line apart); None for anything else."""
    if source == EMPTY_STATE:
        return [source]
    paragraphs: list[str] = []
    lines: list[str] = []
    for line in source.split("\n"):
        if not line:
            if not lines:
                return None  # a blank line first, or two in a row: Markdown folds them
            paragraphs.append("\n".join(lines))
            lines = []
            continue
        text = line[:-2]
        if (
            not line.endswith("  ")
            or not text[:1].isalpha()
            or text.endswith(" ")
            or not all(ch.isalnum() or ch in _PLAIN_MARKS for ch in text)
        ):
            return None
        lines.append(text)
    if not lines:
        return None
    paragraphs.append("\n".join(lines))
    return paragraphs


def _plain_lines(console, paragraphs: list[str], width: int) -> list[Strip]:
    """Plain paragraphs drawn as Rich's Markdown draws them (the same lines: see
    tests/test_ui_anchors.py), without markdown-it."""
    if paragraphs == [EMPTY_STATE]:
        text = Text(justify="left")
        text.append(EMPTY_STATE.strip("*"), "markdown.em")
    else:
        text = Text("\n\n".join(paragraphs), justify="left")
    lines = console.render_lines(text, console.options.update_width(max(1, width)), pad=True)
    return [Strip(line, width) for line in lines]


class StateView(RenderedLines):
    """The STATE drawn as the conversation draws answers (Rich's Markdown, as lines):
    one widget with no children, laid out in the same pass as the pane, where
    Textual's `Markdown` mounted a widget per block a frame later. A plain STATE (the
    usual "Goal: ..." lines) is drawn without markdown-it, in the same lines: the
    side panes' first frame does not wait for Markdown's modules."""

    DEFAULT_CSS = "StateView { height: auto; padding: 0 1; }"

    def __init__(self, source: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.source = source  # the Markdown drawn (`_state_view` of the STATE)
        self._lines: tuple[int, str, list[Strip]] | None = None  # width, look, lines

    def update(self, source: str) -> None:
        if source != self.source:
            self.source = source
            self._lines = None
            self.refresh(layout=True)

    def rendered(self, width: int) -> list[Strip]:
        look = markdown_look(self.app)
        if self._lines is None or self._lines[:2] != (width, look.key):
            paragraphs = _plain_paragraphs(self.source)
            if paragraphs is None:
                lines = markdown_lines(look, self.source, width)
            else:
                lines = _plain_lines(look.console, paragraphs, width)
            self._lines = (width, look.key, lines)
        return self._lines[2]


class StatePane(ScrollableContainer, can_focus=True):
    """The `### STATE` anchor as Markdown, scrolled by the wheel and the arrow and page
    keys; `e` edits it, ctrl+s saves, escape cancels.

    Saving posts `StateEdited(text)`; the app stores it as a new STATE version.
    """

    FOCUS_ON_CLICK = False  # a click selects or acts; the keyboard stays (ui/keyroute.py)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "edit", "Edit STATE", id="state_edit"),
        Binding("ctrl+s", "save", "Save STATE", id="state_save"),
        Binding("escape", "cancel", "Cancel edit", id="state_cancel"),
    ]

    DEFAULT_CSS = """
    StatePane { height: 1fr; min-height: 3; overflow-y: auto; }
    StatePane #state-view { height: auto; margin: 0; padding: 0 1; }
    StatePane #state-editor { height: auto; min-height: 6; max-height: 20; display: none; }
    StatePane #state-hint { color: $text-muted; padding: 0 1; display: none; }
    StatePane.-editing #state-view { display: none; }
    StatePane.-editing #state-editor, StatePane.-editing #state-hint { display: block; }
    """

    class StateEdited(Message):
        """The user saved an edited STATE."""

        def __init__(self, pane: StatePane, text: str) -> None:
            super().__init__()
            self.pane = pane
            self.text = text

        @property
        def control(self) -> StatePane:
            return self.pane

    def __init__(
        self,
        state: str | None = None,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.state_text = state or ""
        self.changed_while_editing = False

    def compose(self) -> ComposeResult:
        yield StateView(_state_view(self.state_text), id="state-view")
        # The editor's Markdown highlighting is loaded when it first opens (`e`).
        yield SafeTextArea("", id="state-editor", soft_wrap=True)
        yield Static("ctrl+s saves a new STATE version · escape cancels", id="state-hint")

    @property
    def editing(self) -> bool:
        return self.has_class("-editing")

    def set_state(self, text: str | None) -> None:
        """Show the current STATE; an open editor keeps the user's text."""
        text = text or ""
        if text == self.state_text:
            return
        self.state_text = text
        if self.editing:
            self.changed_while_editing = True
            self.query_one("#state-hint", Static).update(
                "a turn wrote a new STATE while you edit · ctrl+s saves yours as the newest "
                "· escape shows the new one"
            )
        else:
            self.query_one(StateView).update(_state_view(text))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Outside the editor, escape and ctrl+s belong to the app (cancel the turn, ...).
        if action in ("save", "cancel"):
            return self.editing
        if action == "edit":
            return not self.editing
        return True

    def action_edit(self) -> None:
        editor = self.query_one("#state-editor", TextArea)
        if editor.language is None:
            editor.language = "markdown"
        editor.load_text(self.state_text)
        self.changed_while_editing = False
        self.query_one("#state-hint", Static).update(
            "ctrl+s saves a new STATE version · escape cancels"
        )
        self.add_class("-editing")
        self.refresh_bindings()
        editor.focus()

    def action_save(self) -> None:
        text = self.query_one("#state-editor", TextArea).text
        self.post_message(self.StateEdited(self, text))
        self.state_text = text
        self._leave_editor()

    def action_cancel(self) -> None:
        self._leave_editor()

    def _leave_editor(self) -> None:
        self.remove_class("-editing")
        self.refresh_bindings()
        self.query_one(StateView).update(_state_view(self.state_text))
        self.focus()


class ScratchpadEditor(Widget):
    """The session's scratchpad as a markdown editor that saves itself.

    Edits are saved `SCRATCHPAD_DEBOUNCE` seconds after the last keystroke, or
    at once when the editor loses focus, by posting `ScratchpadSaved(text)`.
    `external_update(text)` brings in the ledger's version after the model
    (or another command) changed it: silently when there are no unsaved
    edits, otherwise with a notice and ctrl+r to take the model's version.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "load_model_version", "Load model's version", id="scratchpad_load_model"),
        Binding("ctrl+s", "save_now", "Save scratchpad", id="scratchpad_save"),
    ]

    DEFAULT_CSS = """
    ScratchpadEditor { height: 1fr; }
    ScratchpadEditor #scratchpad-notice {
        display: none;
        color: $text-warning;
        background: $warning-muted;
        padding: 0 1;
    }
    ScratchpadEditor.-conflict #scratchpad-notice { display: block; }
    ScratchpadEditor #scratchpad-text { height: 1fr; }
    """

    class ScratchpadSaved(Message):
        """Store `text` as the scratchpad of `session` (None: the current one).

        `base` is the ledger version the user's edits started from; if the
        ledger now holds something else, the model wrote in between: call
        `external_update(stored)` instead of writing, and the user decides.
        """

        def __init__(self, editor: ScratchpadEditor, text: str, base: str, session: str | None):
            super().__init__()
            self.editor = editor
            self.text = text
            self.base = base
            self.session = session

        @property
        def control(self) -> ScratchpadEditor:
            return self.editor

    def __init__(
        self,
        text: str = "",
        *,
        session: str | None = None,
        debounce: float = SCRATCHPAD_DEBOUNCE,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.session = session
        self.debounce = debounce
        self._base = text  # the newest version known to be in the ledger
        # What the editor showed for `_base`. TextArea normalises line ends (a
        # lone CR the model wrote becomes a newline), so the two can differ;
        # only a keystroke, not loading, may make the editor dirty.
        self._shown = text
        self._initial = text
        self._model_text: str | None = None  # the model's version, while in conflict
        self._conflict_text: str | None = None  # the editor's text when the conflict began
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(CONFLICT_NOTICE, id="scratchpad-notice", markup=False)
        yield SafeTextArea(self._initial, id="scratchpad-text", language="markdown", soft_wrap=True)

    # -- state -------------------------------------------------------------

    @property
    def area(self) -> TextArea:
        return self.query_one("#scratchpad-text", TextArea)

    @property
    def text(self) -> str:
        """The editor's text: always the latest keystroke, saved or not."""
        return self.area.text

    @property
    def dirty(self) -> bool:
        """True while the editor holds edits the ledger does not have."""
        return self.text != self._shown

    @property
    def in_conflict(self) -> bool:
        """True while the model's version waits for the user's choice."""
        return self._model_text is not None

    @property
    def model_text(self) -> str | None:
        return self._model_text

    # -- API ---------------------------------------------------------------

    def load(self, text: str, session: str | None = None) -> None:
        """Show a session's stored scratchpad (on start or after a switch); nothing pending.

        Call `flush()` first so unsaved edits of the previous session are posted.
        """
        self._stop_timer()
        self._end_conflict()
        self.session = session if session is not None else self.session
        self._base = text
        self.area.load_text(text)
        self._shown = self.area.text

    def external_update(self, text: str) -> None:
        """The ledger's scratchpad changed (a turn, a command, or our own save echoing back)."""
        if _same(text, self._base) and not self.in_conflict:
            return  # nothing new
        if _same(text, self.text):
            self._base = self._shown = self.text
            self._stop_timer()
            self._end_conflict()
            return
        if not self.dirty and not self.in_conflict:
            self._base = text
            _replace_all(self.area, text)
            self._shown = self.area.text
            return
        # Unsaved edits: keep them on screen, hold the model's version, stop autosave
        # until the user types again (which means "overwrite it") or presses ctrl+r.
        self._stop_timer()
        self._base = text
        self._model_text = text
        self._conflict_text = self.text
        self.add_class("-conflict")
        self.refresh_bindings()

    def flush(self) -> bool:
        """Save unsaved edits now (before a session switch or exit); True if it posted."""
        self._stop_timer()
        if not self.dirty:
            return False
        self._save()
        return True

    def action_save_now(self) -> None:
        self.flush()

    def action_load_model_version(self) -> None:
        """Replace the user's text with the model's (ctrl+z brings the user's back)."""
        if self._model_text is None:
            return
        text = self._model_text
        self._stop_timer()
        self._end_conflict()
        self._base = text
        _replace_all(self.area, text)
        self._shown = self.area.text

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "load_model_version":
            return self.in_conflict
        return True

    # -- saving ------------------------------------------------------------

    @on(TextArea.Changed, "#scratchpad-text")
    def _changed(self, event: TextArea.Changed) -> None:
        event.stop()
        if not self.dirty:
            self._stop_timer()
            return
        if self.in_conflict and self.text == self._conflict_text:
            return  # a change queued before the conflict, not a new keystroke
        self._stop_timer()
        self._timer = self.set_timer(self.debounce, self._save, name="scratchpad-save")

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        # Leaving the editor saves at once, unless the user still has to choose a version.
        if not self.in_conflict and self.dirty:
            self.flush()

    def _save(self) -> None:
        self._timer = None
        text = self.text
        if text == self._shown and not self.in_conflict:
            return
        self.post_message(self.ScratchpadSaved(self, text, self._base, self.session))
        self._base = self._shown = text
        self._end_conflict()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _end_conflict(self) -> None:
        if self._model_text is not None:
            self._model_text = None
            self._conflict_text = None
            self.remove_class("-conflict")
            self.refresh_bindings()
