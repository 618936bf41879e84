"""The token gauge: the next request against the model's context window.

It draws the context plan (`ContextPlan.layer_tokens`): the same counts the
request is made of, the tool declarations and the rows sent until a summary
covers them included. The arithmetic lives in plain functions (`read_plan`,
`bar_cells`) so it can be tested without a screen; the widgets only draw it.
Nothing animates, so a snapshot of the gauge is the same on every run.

Until the tokenizer is built (the first submit; see `Workspace.display_prompt`)
a request may hold estimated counts: the total is then shown as `≈12,345`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.content import Content, Span
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Sparkline, Static

from slop_tui.ui.numbers import compact_tokens

if TYPE_CHECKING:
    from slop_tui.context.plan import ContextPlan

DEFAULT_CONTEXT_WINDOW = 128_000
WARNING_PERCENT = 80
CRITICAL_PERCENT = 90

# Request order; names the engine adds later are drawn after these.
LAYER_ORDER = (
    "system",
    "guidelines",
    "state",
    "scratchpad",
    "memos",
    "history",
    "tools",
)
LAYER_LABELS = {"state": "STATE"}

ESTIMATE_MARK = "≈"  # before a total that holds estimated counts
ESTIMATE_TOOLTIP = (
    "Estimated: some texts are not counted yet (the tokenizer loads at the first submit)."
)

FILL = "█"
FREE = "░"
SWATCH = "■"


@dataclass(frozen=True, slots=True)
class GaugeReading:
    """Tokens per layer of one request, against a context window."""

    layers: tuple[tuple[str, int], ...]
    context_window: int

    @property
    def total(self) -> int:
        return sum(tokens for _, tokens in self.layers)

    @property
    def percent(self) -> float:
        return 100.0 * self.total / self.context_window if self.context_window else 0.0

    @property
    def level(self) -> str:
        """`ok`, `warning` (at 80 % or more) or `critical` (at 90 % or more)."""
        # Integer comparison, so exactly 80 % is a warning whatever the float rounding.
        scaled = self.total * 100
        if scaled >= CRITICAL_PERCENT * self.context_window:
            return "critical"
        if scaled >= WARNING_PERCENT * self.context_window:
            return "warning"
        return "ok"


def read_plan(plan: ContextPlan, context_window: int = DEFAULT_CONTEXT_WINDOW) -> GaugeReading:
    """The plan's tokens by layer (system, guidelines, STATE, ..., history, tools); they
    add up to the request's tokens."""
    counts = plan.layer_tokens()
    names = [n for n in LAYER_ORDER if n in counts] + [n for n in counts if n not in LAYER_ORDER]
    return GaugeReading(tuple((n, counts[n]) for n in names), max(1, context_window))


def bar_cells(layers: Sequence[tuple[str, int]], scale: int, width: int) -> list[tuple[str, int]]:
    """Cells per layer for a bar of `width` cells where `scale` tokens fill the bar.

    Largest-remainder rounding, so the cells add up to the rounded total; a
    layer with any tokens gets at least one cell while there is room.
    """
    total = sum(t for _, t in layers)
    if width <= 0 or scale <= 0 or total <= 0:
        return [(name, 0) for name, _ in layers]
    used = min(width, round(total * width / scale))
    exact = [t * used / total for _, t in layers]
    cells = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(layers)), key=lambda i: (cells[i] - exact[i], i))
    for i in by_remainder[: used - sum(cells)]:
        cells[i] += 1
    for i, (_, tokens) in enumerate(layers):
        if tokens > 0 and cells[i] == 0:
            donor = max(range(len(cells)), key=lambda j: cells[j])
            if cells[donor] > 1:
                cells[donor] -= 1
                cells[i] = 1
    return [(name, c) for (name, _), c in zip(layers, cells, strict=True)]


def layer_class(name: str) -> str:
    return f"token-gauge--{name}" if name in LAYER_ORDER else "token-gauge--other"


class GaugeBar(Widget):
    """The stacked bar and its legend; coloured by `TokenGauge`'s component classes."""

    DEFAULT_CSS = """
    GaugeBar { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.reading: GaugeReading | None = None
        self._width = 0  # as the layout gave it (see get_content_height)

    def show(self, reading: GaugeReading) -> None:
        self.reading = reading
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Its height depends on its width (the legend wraps), so Textual renders it
        # while laying the screen out: the width comes from here. `self.size` there
        # asked the compositor for a map it was still building, and it built a whole
        # second one (10-25 ms in the frame after every turn).
        # Rendered here at this width, not through Textual's cached visual: that one was
        # made at the previous width, and the legend wraps differently at this one.
        self._width = width
        return self.render().get_height(self.styles, width) if width else 0

    def render(self) -> Content:
        reading = self.reading
        if reading is None:
            return Content("no request assembled yet")
        width = self._width or self.size.width
        scale = max(reading.context_window, reading.total)
        text, spans = "", []
        for name, cells in bar_cells(reading.layers, scale, width):
            if cells:
                spans.append(Span(len(text), len(text) + cells, "." + layer_class(name)))
                text += FILL * cells
        free = max(0, width - len(text))
        spans.append(Span(len(text), len(text) + free, ".token-gauge--free"))
        text += FREE * free
        # The legend is packed by hand so an item never breaks across lines.
        items = [
            (name, f"{SWATCH} {LAYER_LABELS.get(name, name)} {compact_tokens(tokens)}")
            for name, tokens in reading.layers
            if tokens or name == "history"
        ]
        column = width  # forces a newline before the first item
        for name, label in items:
            if column + 2 + len(label) > width:
                text += "\n"
                column = 0
            elif column:
                text += "  "
                column += 2
            spans.append(Span(len(text), len(text) + 1, "." + layer_class(name)))
            text += label
            column += len(label)
        return Content(text, spans)


class TokenGauge(Widget):
    """Next request's tokens vs the context window, by layer, with a per-turn sparkline.

    Call `update_from(plan, context_window, series, cached, estimated, background)`
    after every change that alters the next request, and `set_projection(tokens,
    verb)` while a group is highlighted in the group list. The widget gets the
    CSS class `-warning` at 80 % and `-critical` at 90 % of the window.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"token-gauge--{name}" for name in LAYER_ORDER),
        "token-gauge--other",
        "token-gauge--free",
    }

    DEFAULT_CSS = """
    TokenGauge { height: auto; padding: 0 1; }
    TokenGauge > .token-gauge--system { color: $primary; }
    TokenGauge > .token-gauge--guidelines { color: $primary-lighten-3; }
    TokenGauge > .token-gauge--state { color: $accent; }
    TokenGauge > .token-gauge--scratchpad { color: $secondary-lighten-2; }
    TokenGauge > .token-gauge--memos { color: $success-darken-1; }
    TokenGauge > .token-gauge--pending { color: $warning 70%; }
    TokenGauge > .token-gauge--history { color: $foreground 80%; }
    TokenGauge > .token-gauge--tools { color: $foreground 50%; }
    TokenGauge > .token-gauge--other { color: $foreground-muted; }
    TokenGauge > .token-gauge--free { color: $surface-lighten-2; }
    TokenGauge #gauge-total { color: $text-success; }
    TokenGauge.-warning #gauge-total { color: $text-warning; text-style: bold; }
    TokenGauge.-critical #gauge-total { color: $text-error; text-style: bold reverse; }
    TokenGauge #gauge-sparkline { height: 2; margin-top: 1; }
    TokenGauge #gauge-series, TokenGauge #gauge-cached, TokenGauge #gauge-background {
        color: $text-muted;
    }
    TokenGauge #gauge-projection { color: $text-accent; height: 1; }
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.reading = GaugeReading((), DEFAULT_CONTEXT_WINDOW)
        self.series: list[int] = []
        self.cached: int | None = None
        self.projection: int | None = None
        self.projection_verb = "drop"
        self.background: tuple[int, int] = (0, 0)  # background calls, their tokens
        self.estimated = False
        self._drawn_room: int | None = None  # the columns the lines were last fitted to

    def compose(self) -> ComposeResult:
        yield GaugeBar(id="gauge-bar")
        yield Static("", id="gauge-total", markup=False)
        yield Sparkline([], id="gauge-sparkline", summary_function=max)
        yield Static("", id="gauge-series", markup=False)
        yield Static("", id="gauge-projection", markup=False)
        yield Static("", id="gauge-cached", markup=False)
        yield Static("", id="gauge-background", markup=False)

    def on_mount(self) -> None:
        self._draw()

    # -- API ---------------------------------------------------------------

    def update_from(
        self,
        plan: ContextPlan,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        series: Sequence[int] = (),
        cached: int | None = None,
        estimated: bool = False,
        background: tuple[int, int] = (0, 0),
    ) -> None:
        """Show `plan` against `context_window`; `series` is prompt tokens per call, oldest
        first; `estimated`: the plan holds estimated counts (marked `≈`); `background`:
        the session's background model calls (summaries, compaction) and their tokens."""
        self.reading = read_plan(plan, context_window)
        self.series = list(series)
        self.cached = cached
        self.estimated = estimated
        self.background = background
        self._draw()

    def show_plan(self, plan: ContextPlan) -> None:
        """Show the plan of the request just sent (exact counts), keeping the window, the
        series and the background figures drawn last."""
        self.reading = read_plan(plan, self.reading.context_window)
        self.estimated = False
        self._draw()

    def set_projection(self, tokens_saved: int | None, verb: str = "drop") -> None:
        """What `verb` (`drop` or `restore`) of the highlighted group takes off the next
        request (negative: adds), from the plan built with that edit; None hides it."""
        self.projection = tokens_saved
        self.projection_verb = verb
        if self.is_mounted:
            self._draw_projection()

    @property
    def level(self) -> str:
        return self.reading.level

    # -- drawing -----------------------------------------------------------

    def _room(self) -> int:
        """The columns a line of the gauge has (a scrollbar takes its share)."""
        width = self.scrollable_content_region.width or self.content_size.width
        return width if width > 0 else 10_000  # not laid out yet: the long form

    def _fit(self, *forms: str) -> str:
        """The first of `forms` (longest first) that fits a line of the gauge."""
        room = self._room()
        return next((form for form in forms if len(form) <= room), forms[-1])

    def on_resize(self) -> None:
        # Only a new width changes what is drawn. The side panes are laid out before
        # they are filled, and that layout's resize reaches the gauge after the fill:
        # drawn again there, every line was refreshed and the screen laid out once more
        # for the same text, a frame after the panes were shown.
        if self._room() != self._drawn_room:
            self._draw()

    def watch_show_vertical_scrollbar(self) -> None:
        # A scrollbar that appears takes columns without a resize: the lines are
        # fitted again (the short forms), so no `%` wraps onto a line of its own.
        self.call_after_refresh(self._draw)

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        self._drawn_room = self._room()
        reading = self.reading
        self.set_class(reading.level == "warning", "-warning")
        self.set_class(reading.level == "critical", "-critical")
        self.query_one(GaugeBar).show(reading)
        note = {
            "warning": "\nnearly full: drop or summarize old groups",
            "critical": "\nalmost out of room: drop groups or compact now",
        }
        total = self.query_one("#gauge-total", Static)
        mark = ESTIMATE_MARK if self.estimated else ""
        room = self._room()
        line = (
            f"{mark}{reading.total:,} / {reading.context_window:,} tokens · {reading.percent:.1f} %"
        )
        if len(line) > room:  # a narrow pane: the short form, never a `%` on a line of its own
            line = (
                f"{mark}{compact_tokens(reading.total)} / "
                f"{compact_tokens(reading.context_window)} · {reading.percent:.1f} %"
            )
        total.update(line + note.get(reading.level, ""))
        total.tooltip = ESTIMATE_TOOLTIP if self.estimated else None
        self.query_one(Sparkline).data = self.series
        if self.series:
            last, top = compact_tokens(self.series[-1]), compact_tokens(max(self.series))
            series = f"prompt per call: last {last} · max {top}"
        else:
            series = "prompt per call: no calls yet"
        self.query_one("#gauge-series", Static).update(series)
        cached = self.query_one("#gauge-cached", Static)
        cached.display = self.cached is not None
        if self.cached is not None:
            # The series ends with the last call's prompt tokens: the share of it cached.
            prompt = self.series[-1] if self.series else 0
            share = f" ({100 * self.cached / prompt:.0f} % of its prompt)" if prompt > 0 else ""
            short = f" ({100 * self.cached / prompt:.0f} %)" if prompt > 0 else ""
            few = compact_tokens(self.cached)
            cached.update(
                self._fit(
                    f"cached in the last call: {self.cached:,} tokens{share}",
                    f"cached last call: {few}{short}",
                    f"cached: {few}{short}",
                )
            )
        calls, tokens = self.background
        background = self.query_one("#gauge-background", Static)
        background.display = calls > 0
        spent = compact_tokens(tokens)
        background.update(
            self._fit(
                f"background calls (summaries, compaction): {calls} · {spent} tokens",
                f"background calls: {calls} · {spent} tokens",
                f"background: {calls} · {spent}",
            )
        )
        self._draw_projection()

    def _draw_projection(self) -> None:
        line = self.query_one("#gauge-projection", Static)
        saved = self.projection
        if saved is None:
            # Keep the line (empty) so moving through the groups never reflows the pane.
            text = ""
        else:
            reading = self.reading
            after = 100.0 * (reading.total - saved) / reading.context_window
            verb = self.projection_verb
            if saved > 0:
                text = f"{verb}: −{saved:,} tokens → {after:.1f} %"
            elif saved < 0:
                text = f"{verb}: +{-saved:,} tokens → {after:.1f} %"
            else:
                text = f"{verb}: no change to the next request"
        # One line of fixed height: no layout pass. With one, every key in the groups
        # pane reflowed the whole screen (conversation included) for this line.
        line.update(text, layout=False)
