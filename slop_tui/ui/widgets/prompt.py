"""The prompt: a multi-line editor with history and slash-command completion.

Keys (each binding has an id for `[keymap]`):

- Enter sends (`prompt_submit`). A new line is shift+enter, ctrl+j or
  alt+enter (`prompt_newline`): terminals differ in what they report, and
  shift+enter only arrives on terminals that speak the Kitty keyboard
  protocol (kitty, WezTerm, foot, Ghostty, recent iTerm2); ctrl+j works
  everywhere because the terminal sends it as a line feed.
- Up on the first line and Down on the last line walk the history, which
  the app provides with `set_history` and persists from `Submitted`.
- Typing `/` lists the matching commands with their usage; Tab takes the
  highlighted one (`prompt_complete`), Up/Down move through the list,
  Escape closes it. Enter also takes it while the line is not yet a command.

A pasted text that names image files (a file dragged in from a file manager
arrives as a paste of its path) offers them on a line under the editor
(`widgets/image_paste.py`): ctrl+t (`prompt_attach_image`) runs `/image add`
for each and takes their paths out of the prompt; Escape, or editing the
pasted text away, leaves the text as pasted. The offer takes no key that types
or sends: typing goes on into the prompt and Enter sends the text as it is.

ctrl+z and ctrl+y undo and redo the typing. ctrl+y with no typing to redo,
and ctrl+z in an empty prompt with no typing to undo, are passed on to the
app: its /redo and /undo of the history (the announcement of an edit names
ctrl+y, and it must work right after a command was typed here).

Nothing typed is lost: `Submitted` leaves the text in place until the app
calls `clear()` (which also adds it to the history); `restore(text)` puts a
text back, e.g. after a failed send.

Keys land in the order they were typed. The prompt's own keys (Enter, the
editing keys) act as the prompt receives them, not once the key has gone up
to the app: in a burst (`/trash empty`, Enter, `yy`), the `yy` queued behind
Enter would otherwise be typed before Enter sends. From a submit until the
screen has taken the line (`release_keys`), the keys that follow wait: they are
typed then, in order, or dropped when the line opened a dialog (they were typed
for the screen behind it, and never reach it).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import events, on
from textual.actions import SkipAction
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.events import Key
from textual.message import Message
from textual.widgets import OptionList, TextArea
from textual.widgets.option_list import Option
from textual.widgets.text_area import Edit, EditResult

from slop_tui.ui import echo
from slop_tui.ui.widgets.editor import SafeTextArea
from slop_tui.ui.widgets.image_paste import ImageOffer, Offer, locate, offer_for, with_images

PLACEHOLDER = "Type a prompt or /help · Enter sends · shift+enter or ctrl+j: new line"


class CommandCompletions(OptionList, can_focus=False):
    """The slash-command list above the editor; it never takes the focus."""

    DEFAULT_CSS = """
    CommandCompletions {
        display: none;
        height: auto;
        max-height: 8;
        border: none;
        padding: 0 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    CommandCompletions.-shown { display: block; }
    """


class PromptArea(SafeTextArea):
    """The editor inside `PromptInput`; keys that are not editing go to its parent."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "Send", id="prompt_submit"),
        Binding("shift+enter,ctrl+j,alt+enter", "newline", "New line", id="prompt_newline"),
        Binding("tab", "complete", "Complete", show=False, id="prompt_complete"),
        Binding(
            "escape", "close_completions", "Close list", show=False, id="prompt_close_completions"
        ),
        Binding("ctrl+t", "attach_pasted", "Attach image", show=False, id="prompt_attach_image"),
    ]
    DEFAULT_CSS = """
    PromptArea { height: auto; min-height: 3; max-height: 12; }
    """
    _echo_pending = False  # a draw of the latest change is asked for (see _echo)

    @property
    def owner(self) -> PromptInput:
        parent = self.parent
        assert isinstance(parent, PromptInput)
        return parent

    async def _on_key(self, event: Key) -> None:
        owner = self.owner
        if owner.held is not None:  # a line was submitted and not taken yet
            owner.held.append((event.key, event.character))
            event.prevent_default()
            event.stop()
            return
        if not (event.is_printable and event.character) or event.key in ("enter", "tab"):
            if await self._run_own_binding(event.key):
                event.prevent_default()
                event.stop()
                return
        # TextArea inserts a line break for Enter itself; leave Enter to the
        # bindings so prompt_submit / prompt_newline (and any remap) decide.
        if event.key == "enter":
            event.prevent_default()

    async def _run_own_binding(self, key: str) -> bool:
        """Run this editor's binding of `key` now, in order with the typing around it
        (see the module docstring); False when it has none or its action passed."""
        active = self.screen.active_bindings.get(key)
        if active is None or active.node is not self or not active.enabled:
            return False
        return await self.app.run_action(active.binding.action, self)

    async def replay(self, key: str, character: str | None) -> bool:
        """A key that waited behind a submit, typed now (`PromptInput.release_keys`);
        False when it was posted to the app instead (a key for the screen or the app)."""
        owner = self.owner
        if owner.held is not None:  # a replayed Enter submitted again: wait once more
            owner.held.append((key, character))
        elif await self._run_own_binding(key):
            pass
        elif character and character.isprintable() and key not in ("enter", "tab"):
            start, end = self.selection
            self.move_cursor(self.replace(character, start, end).end_location)
        else:  # a key for the screen or the app (an F-key, ctrl+z in an empty prompt)
            self.app.post_message(events.Key(key, character))
            return False
        return True

    # What a key changed is drawn at once, not after the frame a streaming reply or
    # a turn's end is drawing (ui/echo.py). Asked for on every edit and cursor move,
    # not on the key: keys bound to actions (backspace, delete, arrows, undo) act
    # after the key event has gone up to the app, a draw asked for on the key came
    # before the change, and the change waited for the next frame.

    def edit(self, edit: Edit) -> EditResult:
        result = super().edit(edit)
        self._echo()
        return result

    def watch_selection(self) -> None:
        self._echo()

    def _echo(self) -> None:
        if not self._echo_pending:
            self._echo_pending = True
            self.call_later(self._draw_now)

    def _draw_now(self) -> None:
        self._echo_pending = False
        echo.draw_now(self)

    def action_submit(self) -> None:
        self.owner.submit()

    def action_undo(self) -> None:
        history = self.history
        if not self.text and not history.undo_stack and not history.redo_stack:
            raise SkipAction()  # an untouched empty prompt: the app's /undo
        super().action_undo()

    def action_redo(self) -> None:
        if not self.history.redo_stack:
            raise SkipAction()  # no typing to redo: the app's /redo (it only brings back)
        super().action_redo()

    def action_newline(self) -> None:
        start, end = self.selection
        if not self.read_only:
            self.replace("\n", start, end, maintain_selection_offset=False)

    def action_complete(self) -> None:
        if not self.owner.accept_completion():
            raise SkipAction()  # Tab moves the focus as usual

    def action_close_completions(self) -> None:
        owner = self.owner
        if owner.completions_shown:
            owner.hide_completions()
        elif owner.offer is not None:
            owner.decline_offer()
        else:
            raise SkipAction()  # Escape stays the app's (cancel the turn)

    async def action_attach_pasted(self) -> None:
        if self.owner.offer is None:
            raise SkipAction()
        await self.owner.accept_offer()

    def _on_paste(self, event: events.Paste) -> None:
        # TextArea's own handler (run after this one) inserts the text; then the offer.
        if not self.read_only:
            self.call_later(self.owner.offer_pasted, event.text)

    def action_cursor_up(self, select: bool = False) -> None:
        owner = self.owner
        if owner.completions_shown and not select:
            owner.move_highlight(-1)
        elif not select and self.navigator.is_first_wrapped_line(self.cursor_location):
            if not owner.history_previous():
                super().action_cursor_up(select)
        else:
            super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        owner = self.owner
        if owner.completions_shown and not select:
            owner.move_highlight(1)
        elif not select and self.navigator.is_last_wrapped_line(self.cursor_location):
            if not owner.history_next():
                super().action_cursor_down(select)
        else:
            super().action_cursor_down(select)


class PromptInput(Vertical, can_focus=False):
    """A multi-line prompt with history and slash-command completion.

    Post: `PromptInput.Submitted(text)`. Call `clear()` once the text was
    taken (sent or run), `restore(text)` to put text back, `set_history` at
    start-up. `blink=False` stops the cursor blinking (snapshots).
    """

    DEFAULT_CSS = """
    PromptInput { height: auto; }
    """

    class Submitted(Message):
        """The user pressed Enter on a non-empty prompt; the text is still shown."""

        def __init__(self, prompt_input: PromptInput, text: str) -> None:
            super().__init__()
            self.prompt_input = prompt_input
            self.text = text

        @property
        def control(self) -> PromptInput:
            return self.prompt_input

    def __init__(
        self,
        text: str = "",
        *,
        placeholder: str = PLACEHOLDER,
        blink: bool = True,
        hold_after_submit: bool = False,
        history: list[str] | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.area = PromptArea(
            text,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            highlight_cursor_line=False,
            placeholder=placeholder,
            compact=True,
            id="prompt-area",
        )
        self.area.cursor_blink = blink
        self.completion_list = CommandCompletions(id="prompt-completions")
        self.offer_line = ImageOffer(id="prompt-image-offer")
        self.offer: Offer | None = None  # the images a paste offers (widgets/image_paste.py)
        self._history: list[str] = list(history or [])
        self._index: int | None = None  # position while walking the history
        self._draft = ""  # what was typed before walking the history
        self._submitted: str | None = None
        self._items: list[tuple[str, str]] = []
        self._chosen = False  # the user moved through the completion list
        # Keys typed after a submit, until the screen has taken the line (None: not held).
        # Only for an owner that calls `release_keys` once it has taken the line.
        self.hold_after_submit = hold_after_submit
        self.held: list[tuple[str, str | None]] | None = None

    def compose(self):
        yield self.completion_list
        yield self.area
        yield self.offer_line

    # -- text -----------------------------------------------------------------

    @property
    def text(self) -> str:
        return self.area.text

    @text.setter
    def text(self, value: str) -> None:
        self._set_text(value)

    value = text  # the name `Input` uses, for code written against it

    def _set_text(self, value: str) -> None:
        self.area.text = value
        self.area.move_cursor(self.area.document.end)

    def focus(self, scroll_visible: bool = True) -> PromptInput:
        self.area.focus(scroll_visible)
        return self

    def submit(self) -> None:
        """Post `Submitted` for a non-empty prompt (the text stays until `clear()`)."""
        # Enter takes the highlighted command while the line is not a command yet
        # ("/ses"), or when the user picked one with Up/Down; "/session" runs.
        if self.completions_shown and (self._chosen or not self._is_command(self.text)):
            if self.accept_completion():
                return
        text = self.text
        if not text.strip():
            return
        self.hide_completions()
        self.decline_offer()  # sent as it is
        self._submitted = text
        if self.hold_after_submit:
            self.held = []
        self.post_message(self.Submitted(self, text))

    async def release_keys(self, *, drop: bool = False) -> None:
        """The screen has taken the submitted line: the keys typed since are typed now,
        in order, or dropped (`drop`: the line opened a dialog, and the keys typed as it
        opened were not meant for the screen behind it)."""
        held, self.held = self.held, None
        if held is None or drop:
            return
        for i, (key, character) in enumerate(held):
            if not await self.area.replay(key, character):
                # A key for the screen or the app went back to the app's queue: the
                # keys typed after it follow it there, in order (f3 then up: the list's).
                for later in held[i + 1 :]:
                    self.app.post_message(events.Key(*later))
                return

    def clear(self) -> str:
        """Empty the prompt after the app took the text; a submitted text joins the history."""
        text = self.text
        if self._submitted is not None and self._submitted == text:
            if not self._history or self._history[-1] != text:
                self._history.append(text)
        self._submitted = None
        self._index = None
        self._draft = ""
        self._set_text("")
        self.hide_completions()
        return text

    def restore(self, text: str) -> None:
        """Put `text` back (a send failed, or the app took it and gave it back)."""
        self._index = None
        self._set_text(text)

    # -- history ----------------------------------------------------------------

    @property
    def history(self) -> list[str]:
        return list(self._history)

    def set_history(self, items: list[str]) -> None:
        """The previous prompts, oldest first (the app loads and persists them)."""
        self._history = [t for t in items if t.strip()]
        self._index = None

    def history_previous(self) -> bool:
        if not self._history:
            return False
        if self._index is None:
            self._draft = self.text
            self._index = len(self._history) - 1
        elif self._index == 0:
            return True  # the oldest: stay
        else:
            self._index -= 1
        self._set_text(self._history[self._index])
        return True

    def history_next(self) -> bool:
        if self._index is None:
            return False
        if self._index < len(self._history) - 1:
            self._index += 1
            self._set_text(self._history[self._index])
        else:
            self._index = None
            self._set_text(self._draft)
        return True

    @on(TextArea.Changed, "#prompt-area")
    def _changed(self, event: TextArea.Changed) -> None:
        event.stop()
        text = self.text
        if self._index is not None and text != self._history[self._index]:
            # An edited history entry is a new draft; walking on must not drop it.
            self._index = None
        self._update_completions(text)
        if self.offer is not None and locate(self.offer, text) is None:
            self.decline_offer()  # the pasted text was edited away

    # -- a pasted image path --------------------------------------------------------

    def offer_pasted(self, pasted: str) -> None:
        """After `pasted` was inserted before the cursor: offer the images it names."""
        pasted = pasted.replace("\r\n", "\n").replace("\r", "\n")
        area = self.area
        start = area.document.get_index_from_location(area.cursor_location) - len(pasted)
        if self.text[: max(start, 0)].lstrip().startswith("/"):
            return  # a path typed into a command line (`/image add ...`) is the command's
        offer = offer_for(pasted, start, self._root())
        if offer is None:
            return
        self.offer = offer
        key = _key_for(self, "prompt_attach_image", "ctrl+t")
        self.offer_line.update(
            Content.assemble(
                (offer.label, "bold"), f"  {key} attaches · esc keeps the text as pasted"
            )
        )
        self.offer_line.add_class("-shown")

    def decline_offer(self) -> None:
        self.offer = None
        self.offer_line.remove_class("-shown")

    async def accept_offer(self) -> None:
        """Attach the offered images with `/image add` (reported like a typed command),
        then take the paths of those that were attached out of the prompt."""
        offer = self.offer
        self.decline_offer()
        turns = getattr(self.app, "turns", None)
        if offer is None or turns is None:
            return
        import shlex

        attached = []
        for image in offer.images:
            result = await turns.run_command(f"/image add {shlex.quote(str(image.path))}")
            if result is not None and result.ok:
                attached.append(image)
        if not attached:
            return
        if len(attached) < len(offer.images):
            offer = with_images(offer, attached)
        text = self.text
        at = locate(offer, text)
        if at is None:
            return
        area = self.area
        doc = area.document
        start = doc.get_location_from_index(at)
        end = doc.get_location_from_index(at + len(offer.pasted))
        area.move_cursor(area.replace(offer.rest, start, end).end_location)

    def _root(self) -> Path:
        """Where a relative pasted path starts: the project (as `/image add` reads it)."""
        workspace = getattr(self.app, "workspace", None)
        root = getattr(getattr(workspace, "config", None), "project_root", None)
        return Path(root).resolve() if root else Path.cwd()

    # -- completion -------------------------------------------------------------

    @property
    def completions_shown(self) -> bool:
        return self.completion_list.has_class("-shown")

    @property
    def completion_items(self) -> list[tuple[str, str]]:
        """(completion, usage hint) pairs on show, in order."""
        return list(self._items) if self.completions_shown else []

    def _update_completions(self, text: str) -> None:
        if not text.startswith("/") or "\n" in text:
            self.hide_completions()
            return
        # The command layer is imported at the first "/", not at start-up.
        from slop_tui.commands import TABLE, completions

        items = completions(text)
        if not items:
            self.hide_completions()
            return
        if items != self._items or not self.completions_shown:
            self._items = items
            self._chosen = False
            summaries = {c.label: c.summary for c in TABLE.commands}
            options = self.completion_list
            options.clear_options()
            options.add_options(
                [
                    Option(
                        Content.assemble((usage, "bold"), ("  " + summaries.get(label, ""), "dim")),
                        id=label,
                    )
                    for label, usage in items
                ]
            )
            options.highlighted = 0
            options.add_class("-shown")

    def hide_completions(self) -> None:
        self.completion_list.remove_class("-shown")
        self._items = []
        self._chosen = False

    def move_highlight(self, step: int) -> None:
        options = self.completion_list
        if options.option_count:
            current = options.highlighted or 0
            options.highlighted = (current + step) % options.option_count
            self._chosen = True

    @staticmethod
    def _is_command(text: str) -> bool:
        """True when the line already names a command (Enter then runs it)."""
        from slop_tui.commands import resolve

        return resolve(text)[2] is None

    def accept_completion(self) -> bool:
        """Complete to the highlighted command; False when there is nothing to take."""
        if not self.completions_shown:
            return False
        index = self.completion_list.highlighted
        if index is None or index >= len(self._items):
            return False
        label = self._items[index][0]
        typed = self.text.strip()
        if typed == label or not label.startswith(typed):
            return False  # complete already: only the usage hint is shown
        self._set_text(label + " ")
        return True

    @on(OptionList.OptionSelected, "#prompt-completions")
    def _clicked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.completion_list.highlighted = event.option_index
        self.accept_completion()
        self.area.focus()


def _key_for(node, binding_id: str, default: str) -> str:
    """The key the app binds to `binding_id` now (a `[keymap]` may move it)."""
    key_for = getattr(node.app, "key_for", None)
    return key_for(binding_id, default) if key_for is not None else default


__all__ = ["CommandCompletions", "PromptArea", "PromptInput"]
