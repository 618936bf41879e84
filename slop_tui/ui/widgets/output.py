"""The output pane above the prompt: a command's result as Markdown, its tables fitted.

Textual's Markdown table sizes its columns with a shrinking grid: in a pane of
50-60 columns every column gives way at once and `/session list` reads
`│ gr… │ mes… │ to… │`. Here a table is sized for the pane the way a reader wants
it: each column gets its content's width when the table fits; when it does not,
the free-text columns (a prompt, a note: anything wider than `SHORT` cells) give
way, widest first, and wrap, while the short ones (ids, counts, dates, names) stay
whole. When the short columns alone do not fit, the table is shown as records, one
block a row: its short fields `header value` packed on lines, each free-text field
on lines of its own, so every value is still read whole.
"""

from __future__ import annotations

import textwrap

from rich.cells import cell_len
from textual import events
from textual.content import Content
from textual.layout import Layout
from textual.widgets import Markdown, Static
from textual.widgets._markdown import MarkdownTable, MarkdownTableContent

SHORT = 24  # a column whose cells are all this wide or less is kept whole
FREE_MIN = 12  # a free-text column wraps down to this width, no narrower
PADDING = 2  # a cell's padding (0 1)
FIELD_GAP = "  ·  "


def _collapse(widths: list[int], floors: list[int], excess: int) -> list[int]:
    """Take `excess` cells off `widths`, widest first, none below its floor."""
    widths = list(widths)
    while excess > 0:
        room = [i for i, (w, f) in enumerate(zip(widths, floors, strict=True)) if w > f]
        if not room:
            break
        widest = max(widths[i] for i in room)
        tops = [i for i in room if widths[i] == widest]
        below = max([widths[i] for i in room if widths[i] < widest] + [0])
        floor = max(max(floors[i] for i in tops), below)
        step = min(widest - floor, -(-excess // len(tops)))
        for i in tops:
            cut = min(step, excess, widths[i] - floors[i])
            widths[i] -= cut
            excess -= cut
    return widths


def short_columns(headers: list[str], rows: list[list[str]]) -> list[bool]:
    """Which columns are short (every cell at most `SHORT` cells wide)."""
    return [
        max((cell_len(row[i]) for row in rows if i < len(row)), default=0) <= SHORT
        for i in range(len(headers))
    ]


def fit_columns(headers: list[str], rows: list[list[str]], width: int) -> list[int] | None:
    """Each column's width (padding included) for a grid `width` cells wide (its
    outer lines and the lines between columns take one cell each), or None when the
    short columns cannot all be whole beside the free-text ones at `FREE_MIN`."""
    available = width - (len(headers) + 1)
    natural, floors = [], []
    for index, (header, short) in enumerate(
        zip(headers, short_columns(headers, rows), strict=True)
    ):
        widest_cell = max((cell_len(row[index]) for row in rows if index < len(row)), default=0)
        if short:  # whole; its header may wrap between words
            longest_word = max((cell_len(word) for word in header.split()), default=0)
            natural.append(max(widest_cell, longest_word) + PADDING)
            floors.append(natural[-1])
        else:
            natural.append(max(widest_cell, cell_len(header)) + PADDING)
            floors.append(min(natural[-1], FREE_MIN + PADDING))
    if sum(floors) > available:
        return None
    return _collapse(natural, floors, sum(natural) - available)


def records(headers: list[str], rows: list[list[str]], width: int) -> Content:
    """The table as one block a row, for a pane too narrow for its grid."""
    width = max(width, 1)
    short = short_columns(headers, rows)
    lines: list[Content] = []
    for number, row in enumerate(rows):
        if number:
            lines.append(Content.styled("─" * width, "dim"))
        fields: list[Content] = []
        for header, cell, is_short in zip(headers, row, short, strict=False):
            if not cell.strip() or not is_short:
                continue
            name = Content.styled(header, "bold") + " " if header.strip() else Content("")
            fields.append(name + cell)
        line = Content("")
        for field in fields:
            if line.cell_length and line.cell_length + len(FIELD_GAP) + field.cell_length > width:
                lines.append(line)
                line = Content("")
            line = line + Content.styled(FIELD_GAP, "dim") + field if line.cell_length else field
        if line.cell_length:
            lines.append(line)
        for header, cell, is_short in zip(headers, row, short, strict=False):
            if is_short or not cell.strip():
                continue
            lines.append(Content.styled(header, "bold"))
            lines += [Content("  " + part) for part in textwrap.wrap(cell, max(width - 2, 1))]
    return Content("\n").join(lines)


class FittedTableContent(MarkdownTableContent):
    """A Markdown table's grid with the column widths its table gives it."""

    widths: list[int] | None = None

    def pre_layout(self, layout: Layout) -> None:
        super().pre_layout(layout)
        if self.widths is not None:  # the grid takes the widths as given
            layout.shrink = False  # type: ignore[attr-defined]
            layout.expand = False  # type: ignore[attr-defined]


class FittedTable(MarkdownTable):
    """A Markdown table drawn as a grid fitted to the pane, or as records."""

    DEFAULT_CSS = """
    FittedTable > .records { display: none; height: auto; }
    FittedTable.-records > .records { display: block; }
    FittedTable.-records > FittedTableContent { display: none; }
    """

    def compose(self):
        headers, rows = self._get_headers_and_rows()
        self._headers = headers
        self._rows = rows
        yield FittedTableContent(headers, rows)
        yield Static("", classes="records", markup=False)

    def on_resize(self, event: events.Resize) -> None:
        headers = [header.plain for header in self._headers]
        rows = [[cell.plain for cell in row] for row in self._rows]
        width = event.size.width
        widths = fit_columns(headers, rows, width)
        self.set_class(widths is None, "-records")
        if widths is None:
            self.query_one(".records", Static).update(records(headers, rows, width))
            return
        grid = self.query_one(FittedTableContent)
        if widths != grid.widths:
            grid.widths = widths
            grid.styles.grid_columns = " ".join(str(w) for w in widths)


class OutputMarkdown(Markdown):
    """Markdown whose tables fit the pane (the output pane's)."""

    BLOCKS = {**Markdown.BLOCKS, "table_open": FittedTable}
