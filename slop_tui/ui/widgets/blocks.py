"""The pieces of the conversation pane: one `GroupBlock` per group, its answer and tool blocks.

Performance rules (tui_anchors.md §4, providers_testing.md §5, measured here):

- Textual's `Markdown` widget mounts a widget per block and costs 30-100 ms
  each on a 2-core machine, so answers are one light widget drawn from lines
  that Rich renders: `AnswerBlock` in the history, `LiveAnswer` for the
  streamed one (replaced by an `AnswerBlock` when the next turn starts).
- The live answer stays cheap however long it grows: its stream is paced
  (`LIVE_INTERVAL`); at each append only the open (last) top-level block is
  rendered again, the blocks before it are final and rendered once
  (`SettledMarkdown`); blank room below the text (four screens) keeps its
  height, so an append is a repaint of the lines that changed (mostly the
  open block's last one or two), not of the whole answer nor a layout of
  the screen, and the view, which follows the text's end, moves a third of
  the pane at a time, not at every update; Rich renders the new lines in a
  thread.
- Answers are rendered by Rich in a thread before their block is mounted
  when the pane's width is known (`AnswerBlock.render_ahead`).
- Tool calls are one light, focusable block each (a title line; the output
  is mounted only while expanded), not Textual's three-widget `Collapsible`.

Every piece of text from the ledger goes through `neutralise` before it
reaches the screen: tool output may hold terminal escape sequences.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Console
from textual import events
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region, Size
from textual.layout import DockArrangeResult
from textual.message import Message as TextualMessage
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static, TextArea

from slop_tui import message_parser
from slop_tui.records import (
    STATUS_COMPLETED,
    STATUS_DROPPED,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_SUMMARIZED,
    STATUS_TOOL_CALL,
    ImageRef,
    Message,
    ToolCall,
)
from slop_tui.ui.numbers import compact_tokens
from slop_tui.ui.text import carries_line_numbers, keep_state_lines, neutralise, state_lines
from slop_tui.ui.widgets.image_chip import ImageChip

if TYPE_CHECKING:
    from slop_tui.events import ToolCallEvent, ToolResultEvent

# What one block shows at most; `c` copies the whole text and a tool block's
# output opens in a (virtualised) TextArea.
ANSWER_CHARS = 20_000
PROMPT_CHARS = 3_000


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    rest = text.count("\n", limit) + 1
    return text[:limit] + f"\n… ({rest} more lines; c copies the whole text)"


def _one_line(text: str, width: int) -> str:
    flat = " ".join(neutralise(text[: width * 4]).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


# -- messages ---------------------------------------------------------------------


class CopyRequested(TextualMessage):
    """The user pressed `c` on a block; the app puts `text` on the clipboard."""

    def __init__(self, text: str, what: str) -> None:
        super().__init__()
        self.text = text
        self.what = what  # "message" | "group" | "tool result" | "thinking"


# -- blocks -----------------------------------------------------------------------

Fetch = Callable[[int], Awaitable[str | None]]


@dataclass(frozen=True)
class MarkdownLook:
    """How Rich draws an answer in the current theme: a console whose theme gives
    inline code the colours Textual's own Markdown widget gives it (the STATE
    pane), and the Pygments style for fenced code. Rich's defaults (cyan on black,
    `monokai`) were black blocks in a light theme."""

    key: str  # the theme's name and colours (and plain code): rendered lines are cached per look
    console: Console
    code_theme: str
    highlight: bool = True  # fenced code coloured by its Pygments lexer


_LOOKS: dict[str, MarkdownLook] = {}
# The theme variables a look is built from (markdown_look).
_LOOK_VARIABLES = (
    "background",
    "primary",
    "warning",
    "text-warning",
    "error",
    "text-error",
    *(f"markdown-h{n}-{part}" for n in range(1, 7) for part in ("color", "text-style")),
)
_code_highlighting = True


def hold_code_highlighting() -> None:
    """Fenced code is drawn without its lexer until `release_code_highlighting`.

    Pygments builds a lexer's regexes the first time it is used: 60-90 ms of CPU
    each for Python and SQL on the project's machine, most of what the first
    screen's answers cost. The lines are the same, only not coloured."""
    global _code_highlighting
    _code_highlighting = False


def release_code_highlighting() -> None:
    global _code_highlighting
    _code_highlighting = True


def code_highlighting_held() -> bool:
    return not _code_highlighting


def markdown_look(app: Any) -> MarkdownLook:
    """The look for `app`'s current theme (built once per theme and highlighting)."""
    variables = app.theme_variables
    dark = app.current_theme.dark
    # Keyed by the colours the look is made of, not only the theme's name: the name
    # can change a moment before the variables do, and two apps in one process may
    # register different themes under one name.
    key = "|".join(
        [
            app.theme,
            "dark" if dark else "light",
            *(str(variables.get(v, "")) for v in _LOOK_VARIABLES),
            "" if _code_highlighting else "(code plain)",
        ]
    )
    look = _LOOKS.get(key)
    if look is not None:
        return look
    from rich.color import Color as RichColor
    from rich.style import Style
    from rich.theme import Theme as RichTheme
    from textual.color import Color

    background = Color.parse(variables["background"])
    # As Textual's MarkdownBlock draws `.code_inline` (dark: $warning 10% on the
    # background, $text-warning; light: $error 5%, $text-error).
    tint, text = ("warning", "text-warning") if dark else ("error", "text-error")
    code_bg = background.blend(Color.parse(variables[tint]), 0.10 if dark else 0.05)
    code_fg = background.blend(Color.parse(variables[text]), 0.95)
    inline = Style(color=RichColor.from_rgb(*code_fg.rgb), bgcolor=RichColor.from_rgb(*code_bg.rgb))
    styles = {"markdown.code": inline, "markdown.code_block": inline}
    # Headings in the theme's Markdown colours and text styles, as Textual's Markdown
    # widget draws them (Rich's own are magenta whatever the theme).
    for n in range(1, 7):
        color = Color.parse(variables.get(f"markdown-h{n}-color", variables["primary"]))
        look_of = variables.get(f"markdown-h{n}-text-style", "bold").replace("none", "")
        styles[f"markdown.h{n}"] = Style.parse(look_of or "none") + Style(
            color=RichColor.from_rgb(*background.blend(color, color.a).rgb)
        )
    console = Console(
        theme=RichTheme(styles),
        color_system=app.console.color_system or "truecolor",
        force_terminal=True,
        legacy_windows=False,
        markup=False,
        highlight=False,
        emoji=False,
        width=80,
    )
    look = MarkdownLook(key, console, "monokai" if dark else "default", _code_highlighting)
    _LOOKS[key] = look
    return look


_rich_markdown: Any = None  # ui/widgets/rich_markdown.py, imported at the first render
_rich_markdown_lock = threading.Lock()


def _markdown() -> Any:
    """ui/widgets/rich_markdown.py (markdown-it, Rich's Markdown, Pygments): imported by
    the first answer rendered, in whichever thread renders it."""
    global _rich_markdown
    module = _rich_markdown
    if module is None:
        with _rich_markdown_lock:
            if _rich_markdown is None:
                from slop_tui.ui.widgets import rich_markdown

                _rich_markdown = rich_markdown
            module = _rich_markdown
    return module


def load_markdown() -> None:
    """Import Markdown's modules now (the app does it in a thread after the first screen)."""
    _markdown()


def markdown_lines(look: MarkdownLook, source: str, width: int) -> list[Strip]:
    """`source` rendered as Markdown by Rich in `look`, as lines of `width` cells."""
    md = _markdown()
    kind = md.SharedParserMarkdown if look.highlight else md.PlainCodeMarkdown
    body = kind(source, look.code_theme)
    console = look.console
    lines = console.render_lines(body, console.options.update_width(max(1, width)), pad=True)
    return [Strip(line, width) for line in lines]


# -- answers' lines kept between starts (the workspace command only) ----------------

# The answers' lines the last starts drew, in the user cache (slop_tui/codecache.py's
# `CacheFile`): the first frame of a session opened again draws its answers from them,
# without importing markdown-it, Rich's Markdown and Pygments (~35 ms of CPU) or
# rendering them (~10-20 ms an answer). Set by `keep_answer_lines`.
_kept_lines: Any = None
# The file keeps the lines of the answers drawn by the last starts' first screens, the
# most recent last. A start adds the first KEPT_PER_START answers it renders (the
# newest groups', drawn first) and none after its first screen is up
# (`first_screen_drawn`): the older groups built ahead for paging and the highlighting
# that follows do not push out the first screens of the sessions opened before.
KEPT_ANSWERS = 128
KEPT_PER_START = 16
_lines_to_add = KEPT_PER_START


def keep_answer_lines(folder: str | Path) -> bool:
    """Keep the lines `answer_lines` renders until the first screen is up in `folder`
    (the user cache), per answer text, width and look: a later start draws an answer
    it finds there without Markdown. The file is per installed copy of the renderer (Rich, markdown-it,
    Pygments and the two modules that call them), written with the dataclass code
    cache (`save_code_cache`); one that cannot be read is ignored and replaced. False
    (nothing kept) when a part of the renderer is not found."""
    global _kept_lines, _lines_to_add
    if _kept_lines is not None:
        return True
    import importlib.util
    import os
    import sys

    import rich

    from slop_tui.codecache import TEXT_FILES, CacheFile, installed_stamp, keep_with_code_cache

    here = os.path.dirname(__file__)
    paths = [__file__, os.path.join(here, "rich_markdown.py"), os.path.dirname(rich.__file__ or "")]
    for name in ("markdown_it", "pygments"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            return False
        paths.append(spec.submodule_search_locations[0])
    stamp = installed_stamp(paths)
    if stamp is None:
        return False
    name = f"{TEXT_FILES[0]}{sys.implementation.cache_tag}-{stamp}.marshal"
    _kept_lines = CacheFile(Path(folder) / name, _lines_key, recent=KEPT_ANSWERS, holds_text=True)
    _lines_to_add = KEPT_PER_START
    keep_with_code_cache(_kept_lines)
    return True


def first_screen_drawn() -> None:
    """Lines rendered from now on are not kept (those kept are still used)."""
    global _lines_to_add
    _lines_to_add = 0


def forget_answer_lines() -> None:
    """No kept lines (the tests)."""
    global _kept_lines
    from slop_tui.codecache import stop_keeping

    if _kept_lines is not None:
        stop_keeping(_kept_lines)
    _kept_lines = None


def _lines_key(key: object) -> bool:
    return (
        type(key) is tuple
        and len(key) == 3
        and type(key[0]) is str
        and type(key[1]) is int
        and type(key[2]) is str
    )


def answer_lines(look: MarkdownLook, source: str, width: int) -> list[Strip]:
    """An answer's lines: `markdown_lines`, or the same lines kept from an earlier start
    (`keep_answer_lines`)."""
    table = _kept_lines
    if table is None:
        return markdown_lines(look, source, width)
    key = (look.key, width, source)
    data = table.get(key)
    if data is not None:
        lines = _lines_from(data, width)
        if lines is not None:
            return lines
    global _lines_to_add
    lines = markdown_lines(look, source, width)
    if _lines_to_add > 0 and (data := _lines_data(lines)) is not None:
        _lines_to_add -= 1
        table.put(key, data)
    return lines


def _lines_data(lines: list[Strip]) -> bytes | None:
    """`lines` as bytes: each line's segments (text, index of its style), and the styles
    (Rich's, pickled once each)."""
    import pickle

    styles: dict[Any, int] = {}
    rows = []
    for line in lines:
        row = []
        for text, style, control in line:
            if control is not None:
                return None  # not made by Markdown: not kept
            row.append((text, -1 if style is None else styles.setdefault(style, len(styles))))
        rows.append(row)
    try:
        return pickle.dumps((list(styles), rows), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return None


def _lines_from(data: bytes, width: int) -> list[Strip] | None:
    import pickle

    from rich.segment import Segment
    from rich.style import Style

    try:
        styles, rows = pickle.loads(data)
        if not all(type(style) is Style for style in styles):
            return None
        return [
            Strip([Segment(text, None if i < 0 else styles[i]) for text, i in row], width)
            for row in rows
        ]
    except Exception:  # a damaged entry: rendered again (and replaced)
        return None


class RenderedLines(Widget):
    """A widget drawn from pre-rendered lines: subclasses give `rendered(width)`.

    Line API only (no children, no Textual Markdown), so a long answer costs one
    widget in every layout pass; the height is the number of rendered lines.
    """

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.rendered(width))

    _styled: dict[int, tuple[Strip, Any, Strip]] | None = None

    def forget_rendered(self) -> None:
        """Let go of every line drawn so far (drawn again if needed)."""
        self._styled = None
        self._styles_cache.clear()

    def on_unmount(self) -> None:
        # An unmounted block may stay in memory a long while: the app's collector
        # freezes what survives a collection (ui/collector.py), and a frozen block
        # that becomes garbage is freed only by the next deep collection. Its lines,
        # most of its size, are freed now, by reference count.
        self.forget_rendered()

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        lines = self.rendered(width)
        if not 0 <= y < len(lines):
            return Strip.blank(width).apply_style(self.visual_style.rich_style)
        # Each line is styled once per style: a growing live answer, or one that moves
        # with its group, is drawn again whole, and styling a line costs more than
        # the rest of drawing it. Keyed by the line object (kept in the entry, so
        # its id stays its own): new lines and a new style miss.
        line = lines[y]
        style = self.visual_style.rich_style
        styled = self._styled
        if styled is None or len(styled) > 2 * len(lines) + 64:
            styled = self._styled = {}
        entry = styled.get(id(line))
        if entry is None or entry[0] is not line or entry[1] != style:
            entry = styled[id(line)] = (line, style, line.apply_style(style))
        return entry[2]


class AnswerBlock(RenderedLines, can_focus=True):
    """An assistant text, rendered as Markdown by Rich: one widget, no children.

    The rendered lines are cached per width: Textual asks for a widget's
    height on every layout pass, and re-rendering 60 answers each time made
    loading a long session take seconds.
    """

    FOCUS_ON_CLICK = False  # a click selects or acts; the keyboard stays (ui/keyroute.py)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "copy", "Copy message", id="conversation_copy_message"),
    ]
    DEFAULT_CSS = """
    AnswerBlock { height: auto; padding: 0 1; }
    AnswerBlock:focus { background: $boost; }
    AnswerBlock.-interrupted { border-left: outer $warning; }
    """

    def __init__(self, source: str, status: str = STATUS_COMPLETED, message_id: int = 0) -> None:
        super().__init__(classes=f"-{status}")
        self.source = source
        self.status = status
        self.message_id = message_id
        # The STATE section keeps its line breaks (Goal:, Context:, … one per row).
        self.shown = keep_state_lines(clip(neutralise(source), ANSWER_CHARS))
        self._lines: tuple[int, str, list[Strip]] | None = None  # width, look, lines

    def _note(self) -> str:
        if self.status == STATUS_INTERRUPTED:
            return "\n\n*‖ interrupted — shown here, never sent to the model*"
        if self.status == STATUS_DROPPED:
            return "\n\n*× dropped — not sent to the model*"
        if self.status == STATUS_ERROR:
            return "\n\n*! ended in an error*"
        return ""

    def forget_rendered(self) -> None:
        super().forget_rendered()
        self._lines = None

    def rendered_lines(self) -> tuple[str, int, str, list[Strip]] | None:
        """What was rendered (the text, the width, the look, the lines), for a block built
        again later for the same message (`reuse_lines`); None when nothing was."""
        if self._lines is None:
            return None
        return (self.shown + self._note(), *self._lines)

    def reuse_lines(self, rendered: tuple[str, int, str, list[Strip]]) -> None:
        """Take lines another block of the same message rendered (`rendered_lines`), if
        they are of the same text and nothing was rendered here yet."""
        source, width, look, lines = rendered
        if self._lines is None and source == self.shown + self._note():
            self._lines = (width, look, lines)

    def rendered(self, width: int) -> list[Strip]:
        """The answer's lines at `width` cells (rendered once per width and theme)."""
        look = markdown_look(self.app)
        if self._lines is None or self._lines[:2] != (width, look.key):
            source = self.shown + self._note()
            self._lines = (width, look.key, answer_lines(look, source, width))
        return self._lines[2]

    async def render_ahead(self, pane_width: int) -> None:
        """Render the lines in a thread before the block is laid out, for a pane whose
        settled answers are `pane_width` cells wide (0: unknown, nothing to do).

        Rich takes 5-80 ms per answer (code blocks are highlighted); done here the
        event loop keeps drawing frames meanwhile, where the layout pass that
        first measures the block would hold it for all of that.
        """
        # An interrupted answer has a one-cell border on its left.
        width = pane_width - (self.status == STATUS_INTERRUPTED)
        look = markdown_look(self.app)
        if width <= 0 or (self._lines is not None and self._lines[:2] == (width, look.key)):
            return
        source = self.shown + self._note()
        lines = await asyncio.to_thread(answer_lines, look, source, width)
        self._lines = (width, look.key, lines)

    async def render_again(self) -> None:
        """Render the lines in the current look in a thread (mounted: at its width),
        then repaint; a look change otherwise renders them in the next layout pass."""
        width = self.content_size.width
        look = markdown_look(self.app)
        if width <= 0 or (self._lines is not None and self._lines[:2] == (width, look.key)):
            return
        height = len(self._lines[2]) if self._lines is not None else -1
        source = self.shown + self._note()
        lines = await asyncio.to_thread(answer_lines, look, source, width)
        self._lines = (width, look.key, lines)
        self.refresh(layout=len(lines) != height)

    def action_copy(self) -> None:
        self.post_message(CopyRequested(self.source, "message"))


# The live answer is redrawn at most this often (seconds). Each redraw lays the
# screen out again (15-40 ms on a 2-core machine); at 200 deltas/s, redrawing
# whenever the loop was free kept it busy and keys waited hundreds of ms.
# Measured with bench/tui.py (2,000 msgs, 30 keys) typing while a
# reply streams took 38 ms median at 0.1 s, 30 ms at 0.15 s and 6 ms at 0.2 s:
# a key has to wait when it lands in a redraw. Five updates a second still read
# as a stream.
LIVE_INTERVAL = 0.2
KEY_FIRST_S = 0.03  # a streamed update waits this long after a key, at most
# While a reply streams the live answer keeps blank room below its text, grown by
# screens: as long as the text grows into it the answer's height does not change, so
# an update repaints the answer's changed lines instead of laying the whole screen out
# (a reflow and a repaint of the pane, 10-15 ms on a 2-core machine). The
# conversation follows the text's last line, not the bottom of the room
# (ConversationView's `follow_live`), moving a third of the pane at once and at least
# LIVE_ROOM lines.
LIVE_ROOM = 8
ROOM_SCREENS = 4  # the room kept below the text, in screens (at least)


class LiveStream:
    """Textual's `MarkdownStream` paced to `interval`: fragments written meanwhile join
    the next `append` of `markdown_widget`.

    `stop` lets the last append finish and flushes what is pending; Textual's
    cancels the task, which can land in the middle of an append.
    """

    def __init__(self, markdown_widget: Any, interval: float = LIVE_INTERVAL) -> None:
        self.markdown_widget = markdown_widget
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._written = asyncio.Event()
        self._pending: list[str] = []
        self._stopped = False
        self._closing = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def write(self, fragment: str) -> None:
        if self._stopped:
            raise RuntimeError("Can't write to the stream after it has stopped.")
        if fragment:
            self._pending.append(fragment)
            self._written.set()
            await asyncio.sleep(0)  # the task wakes up and appends

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._closing.set()
            self._written.set()
            await task
        self._stopped = True

    def cancel(self) -> None:
        """Drop the stream without flushing (its widget is going away)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        self._stopped = True

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.time()  # the first fragment shows at once
        while True:
            await self._written.wait()
            delay = ready - loop.time()
            if delay > 0 and not self._closing.is_set():
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), delay)
            await _after_a_key(self.markdown_widget)
            text = "".join(self._pending)
            self._pending.clear()
            self._written.clear()
            if text:
                await self.markdown_widget.append(text)
            ready = loop.time() + self.interval
            if self._closing.is_set() and not self._pending:
                return


async def _after_a_key(widget: Widget) -> None:
    """Within `KEY_FIRST_S` of a key or a click (the app's collector notes them,
    ui/collector.py), the stream's next update waits until then: its rendering and
    repaint (a layout and a scroll when the view follows it) would be done before the
    key's frame, or in it. What streams meanwhile joins that update."""
    collector = getattr(widget.app, "collector", None) if widget.is_attached else None
    if collector is None:
        return
    loop = asyncio.get_running_loop()
    end = loop.time() + KEY_FIRST_S  # keys keep coming: the stream goes on all the same
    while collector.input_within(KEY_FIRST_S) and loop.time() < end:
        await asyncio.sleep(0.004)


class SettledMarkdown:
    """The live answer's finished blocks, rendered like a history answer.

    Parts are added as the stream closes them and each is rendered once per
    width and theme: an update of a long answer renders only its open block.
    """

    def __init__(self, owner: Widget) -> None:
        self.owner = owner  # the widget whose app gives the look
        self.parts: list[str] = []
        self._width = 0
        self._look = ""  # the theme the lines were drawn in
        self._lines: list[Strip] = []
        self._rendered = 0  # parts already in _lines

    def add(self, text: str) -> None:
        self.parts.append(text)

    def forget(self) -> None:
        """Drop the rendered lines (the parts stay; `rendered` draws them again)."""
        self._width, self._look, self._lines, self._rendered = 0, "", [], 0

    def pending(self, width: int, look: MarkdownLook) -> tuple[int, list[str]]:
        """The parts not yet rendered at `width` in `look`, and where they start."""
        start = self._rendered if (width, look.key) == (self._width, self._look) else 0
        return start, self.parts[start:]

    def take(
        self, width: int, look: MarkdownLook, start: int, new: list[str], lines: list[list[Strip]]
    ) -> None:
        """Add the parts `new`, with `lines` rendered elsewhere (a thread) for the parts
        `pending` gave from `start`, then for `new`. Lines that are no longer the
        next ones (the width, the look or what is rendered changed meanwhile) are
        left out: `rendered` renders those parts itself."""
        self.parts.extend(new)
        if (width, look.key) != (self._width, self._look):
            if start:
                return
            self._width, self._look, self._lines, self._rendered = width, look.key, [], 0
        if start != self._rendered:
            return
        for part in lines:
            _join(self._lines, part, width)
        self._rendered = len(self.parts)

    def rendered(self, width: int) -> list[Strip]:
        """The parts' lines at `width` cells; only new parts are rendered."""
        look = markdown_look(self.owner.app)
        if (width, look.key) != (self._width, self._look):
            self._width, self._look, self._lines, self._rendered = width, look.key, [], 0
        for part in self.parts[self._rendered :]:
            _join(self._lines, markdown_lines(look, part, width), width)
        self._rendered = len(self.parts)
        return self._lines


def _join(lines: list[Strip], more: list[Strip], width: int) -> None:
    """`more` after `lines`: one blank line between two blocks, unless the second
    brings its own (lists, code)."""
    if lines and more and more[0].text.strip():
        lines.append(Strip.blank(width))
    lines.extend(more)


def block_starts(text: str) -> list[int]:
    """The first line of each top-level Markdown block of `text`, parsed as Rich
    parses it: every block but the last is final, whatever text follows."""
    return [t.map[0] for t in _markdown().PARSER.parse(text) if t.level == 0 and t.map]


def changed_lines(old: Sequence[Strip], new: Sequence[Strip]) -> tuple[int, int] | None:
    """The lines from the first that differs between `old` and `new` to the end of the
    longer one (a shorter text leaves lines to blank); None when they are the same."""
    common = min(len(old), len(new))
    first = next((y for y in range(common) if old[y] is not new[y] and old[y] != new[y]), common)
    end = max(len(old), len(new))
    return (first, end) if first < end else None


def _render_live(
    look: MarkdownLook, width: int, parts: list[str], open_shown: str
) -> tuple[list[list[Strip]], list[Strip]]:
    """A live answer's new lines (in a thread): each settled part's, the open block's."""
    done = [markdown_lines(look, part, width) for part in parts]
    return done, markdown_lines(look, open_shown, width) if open_shown.strip() else []


class LiveAnswer(RenderedLines):
    """The streamed answer: one widget drawn from lines, fed through a `LiveStream`.

    The blocks the stream has closed (all but the last) move into `settled`,
    rendered once; the open block (`open_text`) is rendered by Rich at each
    append, so an update costs a block's rendering and a repaint of the
    widget, and a layout only when its height changes: while the text grows
    into the blank room kept below it (`room`), it does not. `source` is the
    text drawn so far; `text` is everything written.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "copy", "Copy message", id="conversation_copy_live"),
    ]
    DEFAULT_CSS = """
    LiveAnswer { height: auto; padding: 0 1; margin: 0; }
    LiveAnswer.-interrupted { border-left: outer $warning; }
    """

    def __init__(self, interval: float = LIVE_INTERVAL) -> None:
        super().__init__()
        self.interval = interval
        self.text_parts: list[str] = []
        self.stream: LiveStream | None = None
        self.source = ""
        self.settled = SettledMarkdown(self)
        self._settled_at = 0  # characters of `source` moved into `settled`
        self.open_text = ""
        self.room = 0  # the height kept while streaming (0: none)
        self._in_state = False  # the settled text ends inside the `### STATE` section
        self._cache: tuple[tuple, list[Strip]] | None = None
        # Called after each change of the text or the room (the conversation follows
        # the text's last line); its argument says whether a layout is on its way.
        self.grown: Callable[[bool], None] | None = None

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    async def write(self, chunk: str) -> None:
        self.text_parts.append(chunk)
        if self.stream is None:
            self.stream = LiveStream(self, self.interval)
            self.stream.start()
        await self.stream.write(neutralise(chunk))

    async def stop(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            await stream.stop()
        self.drop_room()  # the room below goes with the stream

    def drop_room(self) -> None:
        """No blank room below the text (kept again at the next append, unless
        something is shown below the answer)."""
        if self.room:
            self.room = 0
            self.refresh(layout=True)
            self._tell_grown(True)

    async def append(self, markdown: str) -> None:
        """Called by the stream, at most every `interval`: the new text drawn.

        The new lines are rendered by Rich in a thread (a few ms, 20 for a long open
        block) and only then shown: meanwhile the event loop draws the keys."""
        width = self.content_size.width
        before = self._height(width) if width else -1
        source = self.source + markdown
        settled_at, parts, in_state, open_text = self._closed_blocks(source)
        shown: list[Strip] | None = None  # the lines drawn now, if drawn at this width
        if width:
            look = markdown_look(self.app)
            start, pending = self.settled.pending(width, look)
            open_shown = state_lines(open_text.strip("\n"), in_state)[0]
            done, open_lines = await asyncio.to_thread(
                _render_live, look, width, pending + parts, open_shown
            )
            # A key that came while Rich rendered has its frame drawn before this
            # update's repaint and scroll, as one that came before it (LiveStream).
            await _after_a_key(self)
            if self._cache is not None and self._cache[0][:2] == (width, look.key):
                shown = self._cache[1]
            self.settled.take(width, look, start, parts, done)
            lines = list(self.settled.rendered(width))
            _join(lines, open_lines, width)
            self._cache = ((width, look.key, len(self.settled.parts), open_text), lines)
        else:
            for part in parts:
                self.settled.add(part)
        self.source, self._settled_at = source, settled_at
        self._in_state, self.open_text = in_state, open_text
        if width:  # laid out (not the first append): the conversation can follow its end
            self._keep_room(len(self.rendered(width)))
        layout = not width or self._height(width) != before
        if layout or shown is None:
            self.refresh(layout=layout)
        else:
            # Only the lines that changed are painted again: most of an update is the
            # open block's last line or two, the rest of the answer stays as it was.
            changed = changed_lines(shown, self.rendered(width))
            if changed is not None:
                self.refresh(Region(0, changed[0], width, changed[1] - changed[0]))
        self._tell_grown(layout)

    def _tell_grown(self, layout: bool) -> None:
        if self.grown is not None:
            self.grown(layout)

    def _closed_blocks(self, source: str) -> tuple[int, list[str], bool, str]:
        """Where the settled text of `source` ends, the parts it adds (as shown), the
        STATE flag after them and the open block: all but the last top-level block
        are final."""
        settled_at, in_state = self._settled_at, self._in_state
        tail = source[settled_at:]
        starts = block_starts(tail)
        parts: list[str] = []
        if len(starts) >= 2:
            lines = tail.splitlines(keepends=True)
            closed = "".join(lines[: starts[-1]])
            settled_at += len(closed)
            if closed.strip():
                # The STATE section keeps its line breaks, as in a history answer.
                shown, in_state = state_lines(closed.strip("\n"), in_state)
                parts.append(shown)
            tail = tail[len(closed) :]
        return settled_at, parts, in_state, tail

    @property
    def text_height(self) -> int:
        """The lines the text takes (the room below not counted)."""
        return len(self.rendered(self.content_size.width))

    def _keep_room(self, used: int) -> None:
        """Grow the blank room below the text when the text nears its end, by screens
        and then by half the text: the answer's height changes once in three screens
        of text or more, not at every update."""
        parent = self.parent
        if parent is not None and parent.children and parent.children[-1] is not self:
            self.room = 0  # a part below it (a notice, thinking): no gap before it
        else:
            # Four screens or half the text, whichever is more, grown again when less
            # than a screen is left: more than the view's step (a third of the pane) is
            # always below the text, and a growth (a layout of the whole screen, the
            # costliest frame of a stream) comes once in three screens of text, then
            # ever more rarely as the answer grows.
            screen = max(2 * LIVE_ROOM, self.app.size.height if self.is_attached else 0)
            if not self.room or used + screen >= self.room:
                self.room = used + max(ROOM_SCREENS * screen, used // 2)

    def _height(self, width: int) -> int:
        return max(len(self.rendered(width)), self.room)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._height(width)

    def rendered(self, width: int) -> list[Strip]:
        """The settled parts' lines, then the open block's (rendered once per text,
        width and theme)."""
        look = markdown_look(self.app)
        key = (width, look.key, len(self.settled.parts), self.open_text)
        if self._cache is None or self._cache[0] != key:
            lines = list(self.settled.rendered(width))
            _join(lines, self._open_lines(look, width, self.open_text), width)
            self._cache = (key, lines)
        return self._cache[1]

    def _open_lines(self, look: MarkdownLook, width: int, open_text: str) -> list[Strip]:
        shown, _ = state_lines(open_text.strip("\n"), self._in_state)
        return markdown_lines(look, shown, width) if shown.strip() else []

    def forget_rendered(self) -> None:
        super().forget_rendered()
        self._cache = None
        self.settled.forget()

    def on_unmount(self) -> None:
        if self.stream is not None:
            self.stream.cancel()

    def action_copy(self) -> None:
        self.post_message(CopyRequested(self.text, "message"))


def update_in_place(text: Static, content: str | Content) -> None:
    """`text.update(content)`, laid out again only when the new text takes another
    number of lines at its width. A group's header and a tool's title change when the
    plan's marks and tier labels arrive (the side panes' frame): a label that still
    fits on the lines the text had repaints the line; a layout would arrange the
    whole conversation again (and every group in it) for the same heights."""
    size = text.size
    text.update(content, layout=False)
    if not size.width or text.visual.get_height(text.styles, size.width) != size.height:
        text.refresh(layout=True)


class ToolTitle(Static):
    DEFAULT_CSS = """
    ToolTitle { color: $text-muted; padding: 0 1; }
    ToolTitle:hover { color: $text; }
    """

    async def _on_click(self, event: events.Click) -> None:
        event.stop()
        block = self.parent
        if isinstance(block, ToolBlock):
            block.focus()
            await block.toggle()


class ToolBlock(Vertical, can_focus=True):
    """A tool call and its result: a title line; Enter (or a click) opens the full output.

    The title shows the tool, its arguments, ok/error, the output's line count
    and the truncation tier the model will see. The output is read from the
    ledger when the block opens and unmounted when it closes.
    """

    FOCUS_ON_CLICK = False  # a click selects or acts; the keyboard stays (ui/keyroute.py)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,space", "toggle", "Open/close", id="conversation_tool_toggle"),
        Binding("c", "copy", "Copy output", id="conversation_copy_tool"),
    ]
    DEFAULT_CSS = """
    ToolBlock { height: auto; padding: 0; }
    ToolBlock:focus > ToolTitle { background: $block-cursor-background; color: $block-cursor-foreground; }
    ToolBlock.-error > ToolTitle { color: $text-error; }
    ToolBlock.-unsent > ToolTitle { text-style: italic; }
    ToolBlock > .tool-args { color: $text-muted; padding: 0 1 0 3; }
    ToolBlock > TextArea { height: auto; max-height: 20; margin: 0 0 0 3; }
    """

    def __init__(
        self,
        name: str,
        *,
        call_id: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        fetch: Fetch | None = None,
        kind: str = "tool",
    ) -> None:
        super().__init__()
        self.tool_name = name
        self.call_id = call_id
        self.arguments = dict(arguments or {})
        self.fetch = fetch
        self.kind = kind  # "tool" | "thinking"
        self.result: Message | None = None  # the result row, content emptied (memory)
        self.ok: bool | None = None  # None: no result yet
        self.line_count = 0
        self.tier_label = ""
        self.pending = True
        self.memory_text: str | None = None  # live results and thinking keep their text
        self.expanded = False
        self._title = ToolTitle("", markup=False)

    def compose(self):
        # Set before the title is mounted: updating a mounted widget that has not been
        # laid out yet makes Textual look it up in a full map of the screen (a paging cost).
        self._render_title()
        yield self._title

    # -- state --------------------------------------------------------------

    def set_result(self, msg: Message | None, *, ok: bool, text: str, keep: bool = False) -> None:
        self.result = replace(msg, content="") if msg is not None else None
        self.ok = ok
        self.pending = False
        self.line_count = _lines(text)
        self.memory_text = text if keep or msg is None else None
        self.set_class(not ok, "-error")
        self._render_title()

    def set_tier(self, label: str, sent: bool = True) -> None:
        """The plan's label for this result (`full 5000`, `elided`, `dropped`, ...);
        `sent`: whether the next request carries it at all."""
        self.tier_label = label
        self.set_class(not sent, "-unsent")
        self._render_title()

    def finish_without_result(self) -> None:
        if self.pending:
            self.pending = False
            self._render_title()

    def append_thinking(self, text: str) -> None:
        self.memory_text = (self.memory_text or "") + text
        self.line_count = _lines(self.memory_text)
        self._render_title()

    @property
    def title(self) -> str:
        arrow = "▼" if self.expanded else "▶"
        if self.kind == "thinking":
            n = len(self.memory_text or "")
            return f"{arrow} thinking · {n} characters"
        args = json.dumps(self.arguments, ensure_ascii=False) if self.arguments else ""
        head = f"{arrow} {_one_line(self.tool_name, 40)}"
        if args and args != "{}":
            head += " " + _one_line(args, 60)
        if self.pending:
            return f"{head} · running…"
        if self.ok is None:
            return f"{head} · no result"
        parts = [head, "ok" if self.ok else "error", f"{self.line_count} lines"]
        if self.tier_label:
            parts.append(self.tier_label)
        return " · ".join(parts)

    def _render_title(self) -> None:
        update_in_place(self._title, Content(self.title))

    # -- actions ------------------------------------------------------------

    async def full_text(self) -> str:
        if self.memory_text is not None:
            return self.memory_text
        if self.result is not None and self.fetch is not None:
            text = await self.fetch(self.result.id)
            if text is not None:
                return text
        return ""

    async def toggle(self) -> None:
        if self.expanded:
            self.expanded = False
            await self.remove_children(".tool-body")
        else:
            self.expanded = True
            body: list[Widget] = []
            if self.arguments:
                args = json.dumps(self.arguments, ensure_ascii=False, indent=2)
                body.append(Static(Content(neutralise(args)), classes="tool-body tool-args"))
            text = shown_output(await self.full_text())
            if self.ok is not None or self.memory_text is not None:
                area = TextArea(
                    neutralise(text),
                    read_only=True,
                    soft_wrap=True,
                    show_line_numbers=not carries_line_numbers(text),  # one column of them
                    classes="tool-body",
                )
                area.cursor_blink = False
                body.append(area)
            await self.mount_all(body)
        self._render_title()

    async def action_toggle(self) -> None:
        await self.toggle()

    async def action_copy(self) -> None:
        what = "thinking" if self.kind == "thinking" else "tool result"
        self.post_message(CopyRequested(await self.full_text(), what))


# An opened tool block shows at most this many characters of its output: a
# command's output is kept whole in the ledger (up to 8,000,000 characters), and
# loading megabytes into a TextArea (wrapped, numbered) held the event loop for
# seconds. `c` copies all of it; query_db reads it by pages.
TOOL_VIEW_CHARS = 200_000


def shown_output(text: str, limit: int = TOOL_VIEW_CHARS) -> str:
    """`text`, or its head and tail with a line saying how much is left out."""
    if len(text) <= limit:
        return text
    note = ""
    for _ in range(2):  # the count's own length changes what is left out
        left_out = len(text) - max(0, limit - len(note))
        note = (
            f"\n… {left_out:,} characters not shown here (c copies the whole output; "
            "query_db reads it by pages) …\n"
        )
    from slop_tui.context.tiers import cut_middle  # the context engine's: not at start

    return cut_middle(text, limit, note)


def snapshot_label(prompt_tokens: int, completion_tokens: int) -> str:
    """A group's token snapshot, beside its own size in its header: the prompt and the
    completion of its turn's last call, as the live turn shows them."""
    return f"prompt {compact_tokens(prompt_tokens)} · reply {compact_tokens(completion_tokens)}"


def status_mark(status: str) -> str:
    """A group header's word for how its turn ended ("" for a completed one); the
    notice of an interrupted turn uses the same (Orchestrator._interrupted_notice)."""
    return {STATUS_INTERRUPTED: "‖ interrupted", STATUS_ERROR: "! error"}.get(status, "")


class GroupBlock(Vertical, can_focus=True):
    """One group: header, the user prompt, answers, tool blocks, notices."""

    FOCUS_ON_CLICK = False  # a click selects or acts; the keyboard stays (ui/keyroute.py)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "copy", "Copy group", id="conversation_copy_group"),
    ]
    DEFAULT_CSS = """
    GroupBlock { height: auto; margin: 0 0 1 0; border-left: blank; }
    GroupBlock:focus { border-left: thick $accent; }
    GroupBlock > .group-header { color: $text-muted; padding: 0 1; }
    GroupBlock > .user-prompt { background: $boost; padding: 0 1; text-style: bold; }
    GroupBlock > .notice { color: $text-warning; padding: 0 1; }
    GroupBlock > .error { color: $text-error; padding: 0 1; }
    GroupBlock.-dropped > .user-prompt { text-style: strike; text-opacity: 60%; }
    GroupBlock.-dropped > AnswerBlock { text-opacity: 60%; }
    GroupBlock.-live > .group-header { color: $text-accent; }
    """

    ordinal = 0  # the group's place in its session, from 1; 0 while not known

    def __init__(self, group_id: int | None, prompt: str, *, live: bool = False) -> None:
        super().__init__(classes="-live" if live else "")
        self.group_id = group_id
        self.prompt = prompt
        self.live = live
        self.status = STATUS_COMPLETED
        self.tokens = 0
        self.message_count = 0
        self.mark = ""
        self.usage = ""
        self.messages: list[Message] = []  # contents emptied; see GroupBlock.build
        self._header = Static("", markup=False, classes="group-header")
        self._initial: list[Widget] = [
            self._header,
            Static(Content(clip(neutralise(prompt), PROMPT_CHARS)), classes="user-prompt"),
        ]
        self.tools: dict[str, ToolBlock] = {}  # by call id
        self.tool_blocks: list[ToolBlock] = []  # every tool block, in order
        self._prompts: dict[int, Widget] = {}  # each later user message's widget, by id
        self.image_chips: list[ImageChip] = []  # the prompts' images, in order
        self.live_answer: LiveAnswer | None = None
        self.thinking: ToolBlock | None = None
        self.tops: dict[Widget, int] = {}  # live: each part's top, as last arranged

    def compose(self):
        self.render_header()  # before mounting, as ToolBlock.compose says
        yield from self._initial

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        arrangement = super().arrange(size, optimal)
        if self.live:  # where the live answer's text ends (the conversation follows it)
            self.tops = {p.widget: p.region.y for p in arrangement.placements}
        return arrangement

    @property
    def BLANK(self) -> bool:  # noqa: N802 -- Textual's name
        # Live and unfocused, its own lines are blank (a blank border; the parts are
        # children): drawn as blanks they cost nothing, where the styles cache rendered
        # every line of the group each time the streamed reply grew it.
        return self.live and not self.has_focus

    @classmethod
    def build(cls, messages: Sequence[Message], fetch: Fetch | None) -> GroupBlock:
        """A settled group from its ledger rows (oldest first)."""
        gid = messages[0].group_id if messages else None
        first = messages[0] if messages else None
        prompt = first.content if first is not None and first.role == "user" else ""
        block = cls(gid, prompt)
        rest = messages[1:] if prompt else messages
        block.message_count = len(messages)
        block.tokens = sum(m.tokens for m in messages)
        block.status = group_status(messages)
        block.set_class(block.status == STATUS_DROPPED, "-dropped")
        for m in rest:
            block._initial.extend(block._widgets_for(m, fetch))
        for tool in block.tools.values():
            tool.finish_without_result()
        block.messages = [replace(m, content="") for m in messages]
        return block

    @staticmethod
    def rows_about(messages: Sequence[Message], width: int) -> int:
        """About the fewest rows the group's text takes at `width` columns, read from
        its ledger rows before any widget is built: a prompt's lines (as clipped) each
        wrapped at `width`; an answer's paragraphs (Markdown joins a paragraph's lines)
        packed `width` characters to a row, a blank row between two; a tool block one
        row. Its header, borders and spacing are not counted, nor are the extra rows of
        lists and code blocks (Markdown's own marks, dropped when drawn, aside)."""
        if width <= 0:
            return 0
        rows = 0
        for m in messages:
            if m.role == "tool":
                rows += 1
            elif m.role == "user":
                lines = m.content[:PROMPT_CHARS].split("\n")
                rows += sum(max(1, -(-len(line) // width)) for line in lines)
            elif m.role == "assistant":
                text = message_parser.assistant_text(m)[:ANSWER_CHARS]
                paragraphs = [p for p in text.split("\n\n") if p.strip()]
                rows += len(paragraphs) - 1 if paragraphs else 0
                rows += sum(-(-(len(p) - p.count("\n")) // width) for p in paragraphs)
        return rows

    def _widgets_for(self, m: Message, fetch: Fetch | None) -> list[Widget]:
        out: list[Widget] = []
        if m.role == "tool":
            tool = self._tool_for(m.tool_call_id)
            if tool is None:
                tool = ToolBlock(m.tool_name or "unknown", call_id=m.tool_call_id, fetch=fetch)
                self.tool_blocks.append(tool)
                out.append(tool)
            tool.set_result(m, ok=m.status != STATUS_ERROR, text=m.content)
            return out
        if m.role == "user":
            prompt = Static(
                Content(clip(neutralise(m.content), PROMPT_CHARS)), classes="user-prompt"
            )
            self._prompts[m.id] = prompt
            return [prompt]
        text = message_parser.assistant_text(m)
        if text.strip():
            out.append(AnswerBlock(text, m.status, m.id))
        if m.status == STATUS_TOOL_CALL or (m.status == STATUS_DROPPED and m.payload):
            for call in _calls(m):
                tool = ToolBlock(call.name, call_id=call.id, arguments=call.arguments, fetch=fetch)
                self.tools[call.id] = tool
                self.tool_blocks.append(tool)
                out.append(tool)
        return out

    async def show_images(
        self,
        images: Mapping[int, Sequence[ImageRef]],
        file_of: Callable[[ImageRef], Path | None],
        strategy: str,
    ) -> None:
        """A chip for each image attached to one of the group's prompts (`images`: by
        message id), right below that prompt; `strategy` is whose tokens it shows."""
        for mid, refs in images.items():
            prompt = self._prompts.get(mid)
            if prompt is None and mid == self.group_id:
                prompt = self._initial[1]
            if prompt is None:
                continue
            chips = [ImageChip(ref, file_of(ref), strategy) for ref in refs]
            self.image_chips.extend(chips)
            if self.is_mounted and prompt.parent is self:
                await self.mount_all(chips, after=prompt)
            elif prompt in self._initial:
                at = self._initial.index(prompt) + 1
                self._initial[at:at] = chips

    def _tool_for(self, call_id: str | None) -> ToolBlock | None:
        tool = self.tools.get(call_id or "")
        return tool if tool is not None and tool.pending else None

    # -- header -------------------------------------------------------------

    def render_header(self) -> None:
        # The group's place in the session (1, 2, 3 …) and its id, which commands
        # take (/context drop ID): ids are message ids and jump.
        number = f"#{self.ordinal}" if self.ordinal else "#…"
        parts = [f"{number} · id {self.group_id}" if self.group_id is not None else number]
        if self.live:
            parts.append("streaming…")
        else:
            parts.append(f"{self.message_count} message{'' if self.message_count == 1 else 's'}")
        if self.tokens:
            parts.append(f"{compact_tokens(self.tokens)} tokens")
        if self.mark:
            parts.append(self.mark)
        if mark := status_mark(self.status):
            parts.append(mark)
        if self.usage:
            parts.append(self.usage)
        update_in_place(self._header, " · ".join(parts))

    def set_mark(self, mark: str) -> None:
        if mark != self.mark:
            self.mark = mark
            self.render_header()

    # -- the live turn ------------------------------------------------------

    async def live_text(self, text: str) -> None:
        answer = self.live_answer
        if answer is None:
            answer = self.live_answer = LiveAnswer()
            await self.mount(answer)
            if self.live_answer is not answer:
                return  # the turn ended while it was mounted: the block shows its stored form
        await answer.write(text)

    async def end_segment(self) -> None:
        """Text after a tool step starts a new answer block."""
        if self.live_answer is not None:
            await self.live_answer.stop()
            self.live_answer = None

    async def live_thinking(self, text: str) -> None:
        if self.thinking is None:
            self.thinking = ToolBlock("thinking", kind="thinking")
            self.thinking.pending = False
            self.tool_blocks.append(self.thinking)
            await self.mount(self.thinking)
            self._below_the_answer()
        self.thinking.append_thinking(text)

    async def live_tool_call(self, ev: ToolCallEvent, fetch: Fetch | None) -> None:
        await self.end_segment()
        self.thinking = None
        tool = ToolBlock(ev.name, call_id=ev.call_id, arguments=ev.arguments, fetch=fetch)
        self.tools[ev.call_id] = tool
        self.tool_blocks.append(tool)
        await self.mount(tool)

    async def live_tool_result(self, ev: ToolResultEvent, msg: Message | None, fetch) -> None:
        tool = self._tool_for(ev.call_id)
        if tool is None:
            tool = ToolBlock(ev.name, call_id=ev.call_id, fetch=fetch)
            self.tool_blocks.append(tool)
            await self.mount(tool)
        tool.set_result(msg, ok=ev.ok, text=ev.text, keep=msg is None)

    async def line(self, text: str, kind: str) -> None:
        await self.mount(Static(Content(neutralise(text)), classes=kind))
        self._below_the_answer()

    def _below_the_answer(self) -> None:
        # Something shown below a streaming answer: no blank room between the two.
        if self.live_answer is not None:
            self.live_answer.drop_room()

    async def settle(self, messages: Sequence[Message]) -> None:
        """After the turn: statuses, counts and ids from the ledger."""
        await self.end_segment()
        self.live = False
        self.remove_class("-live")
        self.message_count = len(messages)
        self.tokens = sum(m.tokens for m in messages)
        self.status = group_status(messages)
        self.messages = [replace(m, content="") for m in messages]
        interrupted = [
            m for m in messages if m.role == "assistant" and m.status == STATUS_INTERRUPTED
        ]
        answers = list(self.query(LiveAnswer))
        if interrupted and answers:
            answers[-1].add_class("-interrupted")
            await self.mount(
                Static(
                    "‖ interrupted — the partial answer is kept, never sent to the model",
                    classes="notice",
                ),
                after=answers[-1],
            )
        by_id = {m.id: m for m in messages}
        for tool in self.tool_blocks:
            fresh = by_id.get(tool.result.id) if tool.result is not None else None
            if fresh is not None:  # e.g. dropped by the provider-400 auto-fix meanwhile
                tool.result = replace(fresh, content="")
            tool.finish_without_result()
        self.render_header()

    def answers(self) -> list[AnswerBlock]:
        """The settled answer blocks, mounted or not (a live answer is not one)."""
        return [w for w in self._initial if isinstance(w, AnswerBlock)]

    def tool_results(self) -> list[tuple[ToolBlock, Message]]:
        return [(t, t.result) for t in self.tool_blocks if t.result is not None]

    async def action_copy(self) -> None:
        # The conversation view reads the group's full texts from the ledger.
        group_markdown = getattr(self.parent, "group_markdown", None)
        text = await group_markdown(self) if group_markdown is not None else self.prompt
        self.post_message(CopyRequested(text, "group"))


def _calls(m: Message) -> tuple[ToolCall, ...]:
    if m.status == STATUS_TOOL_CALL:
        return message_parser.tool_calls(m)
    # A dropped call row lost its status; its payload still names the calls.
    return message_parser.tool_calls(replace(m, status=STATUS_TOOL_CALL))


def group_status(messages: Iterable[Message]) -> str:
    """The worst status of a group's rows, as `Ledger.list_groups` reports it."""
    statuses = {m.status for m in messages}
    for name in (STATUS_DROPPED, STATUS_SUMMARIZED, STATUS_INTERRUPTED, STATUS_ERROR):
        if name in statuses:
            return name
    return STATUS_COMPLETED


def group_to_markdown(rows: Sequence[Message]) -> str:
    out: list[str] = []
    for m in rows:
        if m.role == "user":
            out.append(f"## You (#{m.group_id})\n\n{m.content}")
        elif m.role == "tool":
            fence = "````" if "```" in m.content else "```"
            out.append(f"**{m.tool_name} result** ({m.status})\n\n{fence}\n{m.content}\n{fence}")
        else:
            text = message_parser.assistant_text(m)
            if text.strip():
                out.append(f"## Assistant ({m.status})\n\n{text}")
            for call in message_parser.tool_calls(m):
                args = json.dumps(call.arguments, ensure_ascii=False)
                out.append(f"**tool call** `{call.name}` `{args}`")
    return "\n\n".join(out) + "\n"
