"""Draw a widget at once after a key, instead of in the next frame (local echo).

Textual draws the screen in frames, at most 60 a second, and a frame that
follows other changes (a streaming reply growing, the panes updated after a
turn) first lays the whole screen out and draws everything that changed. A
key typed then waited for the frame in progress, the next timer tick and all
of that work: 40-70 ms. The prompt and the group list ask for `draw_now`
after each key: their changed lines are drawn in their current place at
once (2-4 ms), and the next frame draws everything else as before (it draws
them again, from Textual's line cache).

It draws nothing while Textual batches updates, when the widget is not on the
top screen, or not where the last layout put it (not laid out yet, hidden):
then the next frame shows the key as it always did. A list that scrolled
draws itself whole, with its scrollbar.

`frame_now` is the same for a key whose effect needs a layout pass (a page
scrolled in the conversation): the screen's next frame is drawn at once, not
at the next tick of Textual's frame timer (up to 1/60 s later, and after
whatever else that tick has to draw).
"""

from __future__ import annotations

from textual.widget import Widget

from slop_tui.ui import textual_fixes


def draw_now(widget: Widget, *also: Widget) -> bool:
    """Draw `widget`'s pending changes now (and those of `also`, e.g. its scrollbar);
    False when that has to wait for the frame."""
    if not widget.is_attached or not widget.display:
        return False
    app = widget.app
    screen = widget.screen
    if app.is_inline or not textual_fixes.drawing_allowed(app, screen):
        return False
    # False when not laid out yet, or hidden: the next frame places it.
    return textual_fixes.draw_widgets(screen, {widget, *also})


def frame_now(widget: Widget) -> None:
    """Draw the screen's next frame now, a scroll of `widget` included, instead of at
    the next tick of the frame timer (after the widget's own scroll update, which
    reaches the screen only once the widget is idle, has come round)."""
    widget.call_later(frame_at_once, widget)


def frame_at_once(widget: Widget) -> None:
    """`frame_now` without waiting for `widget`'s turn: the frame drawn in this call
    (nothing, when no draw may happen now: the frame timer draws it)."""
    if not widget.is_attached:
        return
    screen = widget.screen
    if not textual_fixes.drawing_allowed(widget.app, screen):
        return  # the timer draws it
    textual_fixes.next_frame_now(screen)  # with the layout the widget's scroll asks for
