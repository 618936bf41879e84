"""Where a key lands: typing goes to the prompt, whole; a pane's letter acts only alone.

The rule (docs/usage.md, "Where keys go"):

1. A mouse click selects or acts and leaves the keyboard where it was: lists,
   messages, the STATE pane and the preview are not focused by a click
   (`FOCUS_ON_CLICK = False`); an editor (the prompt, the scratchpad, the STATE
   editor, a dialog's field) is, since a click there means "type here".
2. A printable key that nothing focused binds is typed into the screen's text
   field (the prompt, or a dialog's field), which takes the focus.
3. A letter bound in a pane the user moved to with the keyboard (the group
   list's `d`, a message's `c`, the STATE pane's `e`) acts only when it comes
   alone: it waits `TEXT_RUN` seconds, and when another printable key comes in
   that time the two start a run of text, typed into the prompt, and the letter
   does nothing. A run is text when one of its two keys is a letter, a digit
   or a space: two other bound keys (`[[`, `][`: the window narrowed twice, or
   narrowed and widened) are two actions. A key that is not text (an arrow,
   Enter, an F-key) lets the waiting letter act first, then goes where the
   focus is after it (the STATE pane's `e` then End: the end of the editor). Dialogs answer their keys at
   once (their own guard against type-ahead is in ui/screens/dialogs.py).
4. Before the side panes are filled (the first frames show the conversation and
   the prompt; the panes' contents follow), typing into the prompt lands at once;
   any other key (an F-key, Enter, ctrl+p, a scroll key), and every key after it,
   is kept and handled in order, one at a time, once the panes are filled
   (`kept`): it lands as it would have a moment later.
5. The first-run panel (the demo's welcome, shown without being asked for: a screen
   with `CLOSES_ON_TYPING`) is typed through. A printable key it does not bind, or
   a paste, closes it (`close_for_typing`): that key and every key after it wait
   until the panel has gone, then land in order as if it had not been there, the
   text in the prompt. Its own keys (Escape, Enter, the scroll keys) act as bound.
   Its keys are handled one at a time, each before the next is passed on (`kept`),
   so the keys behind one that closes it land on the workspace. Other dialogs were
   asked for: one with a field takes the typing (2), one without drops it.
6. A key that opens a dialog (its binding's action is marked `opens_dialog`: F1,
   F4, F5, F6) makes the keys and pastes behind it the dialog's. They
   are kept from that key on (`opening_dialog`), as its action runs only once the
   key has passed the focused widget and the dialog shows later still (its action
   reads first), and handled in order, one at a time (`kept`), once the dialog is
   mounted with its field focused (`dialog_shown`). When the action shows none
   (`no_dialog`) or none is up within `DIALOG_WAIT`, they land as without it.
7. A key a dialog binds (Escape, a button's letter) may close it: the keys behind it
   are kept until it has reached the dialog's bindings (`handled`; or a widget
   stopped it on the way, or `HANDLING_WAIT` passed), then land where it left the
   focus: the prompt when it closed the dialog, the dialog's field when it did not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual import events
from textual.widgets import Input, TextArea

from slop_tui.ui.text import has_unsafe, neutralise_cells
from slop_tui.ui.textual_fixes import was_stopped

if TYPE_CHECKING:
    from collections.abc import Callable

    from textual.app import App
    from textual.await_complete import AwaitComplete
    from textual.binding import ActiveBinding
    from textual.screen import Screen
    from textual.timer import Timer

Typed = events.Key | events.Paste  # what the user types: keys, and a bracketed paste

# A pane's letter waits this long for a second key before it acts. Typing runs at
# 100-300 ms a key and bursts (a paste without bracketed paste, keys queued while
# the app is busy) at under 1 ms; a lone key press is a lone key.
TEXT_RUN = 0.3

# The keys typed behind a key that opens a dialog wait this long at most for it to
# show (it reads the ledger first: milliseconds); then they land as if it had not
# been asked for.
DIALOG_WAIT = 5.0

# A kept key waits behind the messages queued for where the key before it went, then
# looks again, this many times at most: what a key asks for settles within two or
# three (a focus moved posts its Blur and Focus as the app handles it).
QUEUED_ROUNDS = 8

# A kept key a dialog binds is waited for this long at most on its way to the dialog's
# bindings (it takes a few messages; a key that never gets there must not hold the rest).
HANDLING_WAIT = 1.0


def is_text(event: events.Key) -> bool:
    """A key that types a character (space included; Tab and Enter are not text)."""
    return bool(event.is_printable and event.character) and event.key not in ("tab", "enter")


def _reads_as_text(run: str) -> bool:
    return any(c.isalnum() or c == " " for c in run)


def _edits_text(event: Typed) -> bool:
    """What a text field takes as an edit of its text: a character, backspace, a paste."""
    if isinstance(event, events.Paste):
        return True
    return is_text(event) or event.key == "backspace"


def _typed_again(event: Typed) -> Typed:
    """A kept key or paste, posted again as the terminal sent it, with the time it was
    typed (a dialog's answer keys compare it: screens/base.py, `Arming`)."""
    again: Typed
    if isinstance(event, events.Paste):
        again = events.Paste(event.text)
    else:
        again = events.Key(event.key, event.character)
    again.time = event.time
    return again


def closes_on_typing(screen: object) -> bool:
    """A panel typing goes on behind (the first-run panel): typing closes it."""
    return bool(getattr(screen, "CLOSES_ON_TYPING", False))


def is_editor(widget: object) -> bool:
    """A field that takes typing (a read-only text area, like the preview, is a pane)."""
    if isinstance(widget, TextArea):
        return not widget.read_only
    return isinstance(widget, Input)


def for_an_input(text: str) -> str:
    """`text` as an `Input` may hold it: Textual's `Input` draws its value as it is, so
    a terminal code in a paste (a coloured log's ESC) is kept as its one-cell visible
    stand-in (␛); line breaks stay (the field takes the first line, as before). The
    prompt and the editors draw their text safely themselves (`SafeTextArea`)."""
    if not has_unsafe(text):
        return text
    return "\n".join(neutralise_cells(line) for line in text.splitlines())


def type_into(target: TextArea | Input, text: str) -> None:
    """Focus a text field and insert `text` at its cursor, as if typed there. The focus
    moves now (`Screen.set_focus`), not after the keys already queued (`focus()`
    waits for them): the rest of a burst goes to the field, not the pane it left."""
    target.screen.set_focus(target)
    if isinstance(target, Input):
        target.insert_text_at_cursor(for_an_input(text))
    else:
        start, end = target.selection
        target.move_cursor(target.replace(text, start, end).end_location)


@dataclass
class Opening:
    """A dialog asked for and not yet up: the keys typed behind its key wait for it."""

    timer: Timer  # gives up on it (`DIALOG_WAIT`)
    dialog: Screen | None = None  # pushed, mounting: the keys go once it is mounted


@dataclass
class _Held:
    character: str
    action: str
    node: Any  # the DOM node whose binding it is
    timer: Timer


class KeyRouter:
    """The app's key routing. `intercept` sees every key of the workspace screen as the
    terminal delivered it, in order, before Textual forwards it to the focused widget,
    so a burst's later keys follow a focus change made for its first ones. `route`
    handles the keys of other screens (dialogs) once the focused widget passed them."""

    def __init__(
        self,
        app: App,
        *,
        panes_screen,
        typing_target,
        busy=lambda: False,
        opens_dialog: Callable[[ActiveBinding], bool] = lambda _active: False,
    ) -> None:
        self.app = app
        self._panes_screen = panes_screen  # () -> the screen whose pane letters wait
        self._typing_target = typing_target  # () -> TextArea | Input | None
        self._held: _Held | None = None
        self._panes_up = False  # the side panes are filled (`panes_filled`)
        self._kept: list[Typed] = []  # keys (and pastes) waiting, in order
        self._replay: Typed | None = None  # a kept key posted again, not yet handled
        self._closing: AwaitComplete | None = None  # a panel typing closed, being removed
        self._busy = busy  # () -> True while the keys typed now would wait anyway
        self._opens_dialog = opens_dialog  # (the key's binding) -> True: it shows a dialog
        self._opening: Opening | None = None  # a dialog a key asked for, not up yet
        self._rounds = 0  # waits behind queued messages for the next kept key
        # A kept key a dialog binds, posted again and not yet through the dialog's
        # bindings (`handled`): the next waits for it, as its action may close the dialog.
        self._handling: events.Key | None = None
        self._handling_since = 0.0
        # The palette closed on a command that has not run yet (`command_chosen`): the
        # keys typed behind it wait for it (it may open a dialog, which takes them).
        self._command_pending = False

    @property
    def holding(self) -> bool:
        return self._held is not None

    async def intercept(self, event: events.Key) -> bool:
        """A key of the workspace screen, before it is forwarded; True: it was taken."""
        held = self._held
        if held is not None:
            run = held.character + (event.character or "")
            if is_text(event) and _reads_as_text(run):
                self._drop_held()
                self._type(run)
                return True
            await self.act_now()  # the waiting key acts first; this one goes on after it
        if not is_text(event):
            return False
        app = self.app
        if is_editor(app.focused):
            return False  # an editor types it itself
        active = app.screen.active_bindings.get(event.key)
        if active is not None and active.enabled:
            self._hold(event.character or "", active.binding.action, active.node)
            return True
        self._type(event.character or "")
        return True

    def kept(self, event: Typed) -> bool:
        """Every key and paste the app receives, first: True when it is kept for later
        (the side panes are not filled yet, keys kept before it are still to be
        handled, a key before it opens a dialog not up yet, or the first-run panel
        shows: its keys are handled one at a time)."""
        if event is self._replay:
            self._replay = None
            if isinstance(event, events.Key) and self._answers_a_dialog(event):
                self._handling = event
                self._handling_since = time.monotonic()
            # The next kept key once this one is handled, with what it asked for (a focus
            # moved with `focus()`, an action, a line sent): after the next frame.
            self.app.call_after_refresh(self._post_next)
            self._note_dialog_key(event)
            return False
        app = self.app
        if (
            not self._kept
            and self._replay is None
            and self._opening is None
            and not self._command_pending
            and not closes_on_typing(app.screen)
            and not self._answers_a_dialog(event)
        ):
            if self._panes_up or (is_editor(app.focused) and _edits_text(event)):
                self._note_dialog_key(event)
                return False
        self._kept.append(event)
        if self._panes_up and len(self._kept) == 1 and self._replay is None:
            self._post_next()  # a panel's or a dialog's key: it goes on at once, in its turn
        return True

    def command_chosen(self) -> None:
        """The palette is closing, on a command the app runs next (Textual queues it
        right behind the palette's dismissal) or on none (Escape): the keys typed
        behind it wait two turns of the loop, until such a command has run, as it may
        ask for a dialog (`opening_dialog`) that takes them."""
        app = self.app
        self._command_pending = True
        # Two turns: the palette queues its command after this call returns.
        app.call_later(lambda: app.call_later(self._command_ran))

    def _command_ran(self) -> None:
        self._command_pending = False
        self._post_next()

    def handled(self, event: events.Key) -> None:
        """A key reached the app after the focused widget and its containers had it (the
        app's bindings act next): if it is the kept key being handled, the next kept
        key goes once this one's action has run."""
        if event is self._handling:
            self._handling = None
            self.app.call_later(self._post_next)

    def _still_handling(self) -> bool:
        """The kept key a dialog binds has not reached its bindings yet (a widget that
        took it stopped it on the way: then it is done)."""
        key = self._handling
        if key is None:
            return False
        if was_stopped(key) or time.monotonic() - self._handling_since > HANDLING_WAIT:
            self._handling = None
            return False
        return True

    def _answers_a_dialog(self, event: Typed) -> bool:
        """A key a dialog binds (Escape, a button's letter, F1 on the help): it may close
        the dialog, so the keys typed behind it wait until it is handled, then land
        where it left the focus (the prompt, when it closed the dialog)."""
        if not isinstance(event, events.Key) or self.app.screen is self._panes_screen():
            return False
        active = self.app.screen.active_bindings.get(event.key)
        return active is not None and active.enabled

    def _note_dialog_key(self, event: Typed) -> None:
        """A key about to be handled that opens a dialog: the keys behind it are the
        dialog's. They are kept from now, as the key's action runs later (Textual runs
        a binding once the key has passed the focused widget, which meanwhile takes
        the keys behind it) and the dialog shows later still (its action reads first)."""
        if not isinstance(event, events.Key) or is_text(event):
            return
        active = self.app.screen.active_bindings.get(event.key)
        if active is not None and active.enabled and self._opens_dialog(active):
            self.opening_dialog()

    def opening_dialog(self) -> Opening:
        """A dialog is asked for: the keys from now on wait until it is up (`dialog_shown`),
        then go to it in order; or, if none shows (`no_dialog`, or not within
        `DIALOG_WAIT`), land where they would have without it."""
        if self._opening is None:
            timer = self.app.set_timer(DIALOG_WAIT, self._release, name="dialog-wait")
            self._opening = Opening(timer)
        return self._opening

    def dialog_shown(self, opening: Opening, dialog: Screen) -> None:
        """The dialog `opening` waited for is pushed: the kept keys go once it is mounted
        (its field focused)."""
        if self._opening is opening and opening.dialog is None:
            opening.dialog = dialog
            self._post_next()

    def no_dialog(self, opening: Opening) -> None:
        """The action that asked for a dialog ended without one (an error, a notice)."""
        if self._opening is opening and opening.dialog is None:
            self._release()

    def _release(self) -> None:
        """The keys kept for a dialog go on: to it when it is up, else as without it."""
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.timer.stop()
        if self._panes_up:
            self._post_next()

    def close_for_typing(self, event: Typed) -> bool:
        """A key of a panel typing closes (`closes_on_typing`), passed on by `kept`; True
        when it closed the panel: a printable key the panel does not bind, or a paste.
        It is kept, first, with the keys behind it, until the panel has gone; then they
        land in order where they would have without it (the text in the prompt)."""
        screen = self.app.screen
        if not closes_on_typing(screen):
            return False
        if isinstance(event, events.Key):
            if not is_text(event) or event.key in screen.active_bindings:
                return False  # the panel's own key (a `[keymap]` may bind a letter): as bound
        elif not event.text:
            return False
        self._kept.insert(0, event)
        self._closing = screen.dismiss()
        self._post_next()
        return True

    def panes_filled(self) -> None:
        """The side panes show the workspace (or it failed to open): the keys kept
        meanwhile are handled, in order."""
        if not self._panes_up:
            self._panes_up = True
            self._post_next()

    def _post_next(self) -> None:
        """The next kept key, as the terminal would send it, once the one before it is
        handled: one at a time, as typed, not as a burst."""
        if not self._kept or self._replay is not None:
            return
        if not self.app.is_running or not self.app.screen_stack:
            return  # the app is closing: its screens are gone
        if self._command_pending:
            return  # `_command_ran` goes on
        opening = self._opening
        if opening is not None:
            if opening.dialog is None:
                return  # the dialog is not pushed yet: `dialog_shown` or `no_dialog` goes on
            if not opening.dialog.is_mounted:
                self.app.set_timer(0.01, self._post_next, name="kept-keys")
                return
            self._release()  # the dialog is up, its field focused: the keys are its
            return
        if self._closing is not None and self._closing.is_done:
            self._closing = None  # the panel typing closed has gone
        # The panel is still being removed, or the key before is still being handled.
        if self._closing is not None or self._busy() or self._still_handling():
            self.app.set_timer(0.01, self._post_next, name="kept-keys")
            return
        if self._waits_behind_queued():
            return
        self._replay = _typed_again(self._kept.pop(0))
        self.app.post_message(self._replay)

    def _waits_behind_queued(self) -> bool:
        """True when messages wait for the app, its screen or the focused widget's chain
        (where the key before went, with what it asked for; on a dialog, any of its
        widgets): the next key goes once they are handled. It waits behind the
        messages queued now, not for empty queues, so a steady stream of new messages
        cannot hold the keys back; it looks again after each wait (what those messages
        asked for), `QUEUED_ROUNDS` times."""
        app = self.app
        screen = app.screen
        if screen is self._panes_screen():
            focused = app.focused
            chain = [app, screen, *(focused.ancestors_with_self if focused else ())]
        else:
            # A dialog (a few widgets): what its key asked for may pass through any of
            # them (the palette's Enter goes from its field to its list, then closes it).
            chain = [app, screen, *screen.walk_children()]
        queued = [node for node in chain if node.message_queue_size]
        if not queued or self._rounds >= QUEUED_ROUNDS:
            self._rounds = 0
            return False
        self._rounds += 1
        waiting = len(queued)

        def handled() -> None:
            nonlocal waiting
            waiting -= 1
            if waiting == 0:
                # From the app, as a key from the terminal comes: a key made while a
                # widget handles a message counts that widget as its sender and
                # stops bubbling there (the screen's bindings would not see it).
                app.call_later(self._post_next)

        for node in queued:
            if not node.call_later(handled):  # a node closing takes no more messages
                handled()
        return True

    def route(self, event: events.Key) -> None:
        """A key of another screen that its focused widget did not take: a printable key
        no binding takes is typed into the screen's text field (a dialog's field)."""
        if not is_text(event) or is_editor(self.app.focused):
            return
        if event.key in self.app.screen.active_bindings:
            return  # a dialog's key: as bound, at once
        event.prevent_default()
        event.stop()
        self._type(event.character or "")

    def route_paste(self, event: events.Paste) -> None:
        """A paste into a list or pane lands in the screen's text field, as typing does."""
        if is_editor(self.app.focused) or not event.text:
            return
        target = self._typing_target()
        if target is None:
            return
        event.stop()
        held, self._held = self._held, None
        if held is not None:
            held.timer.stop()
        type_into(target, (held.character if held else "") + event.text)
        offer = getattr(getattr(target, "owner", None), "offer_pasted", None)
        if offer is not None:  # the prompt offers the images a pasted path names
            offer(event.text)

    def _type(self, text: str) -> None:
        target = self._typing_target()
        if target is not None and text:
            type_into(target, text)

    def _hold(self, character: str, action: str, node: Any) -> None:
        timer = self.app.set_timer(TEXT_RUN, self.act_now, name="text-run")
        self._held = _Held(character, action, node, timer)

    def _drop_held(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.timer.stop()

    async def act_now(self) -> None:
        """The waiting letter acts (it came alone), if its pane is still there."""
        held, self._held = self._held, None
        if held is None:
            return
        held.timer.stop()
        app = self.app
        if not app.is_running or not app.screen_stack:
            return  # the app is closing: its screens are gone
        if app.screen is not self._panes_screen() or not held.node.is_attached:
            return  # a dialog opened or the pane went away meanwhile: the letter is void
        await app.run_action(held.action, held.node)
