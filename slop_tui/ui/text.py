"""How the TUI shows text it did not write: the one place that makes user, model and
command text inert.

`neutralise` (the headless `slop_tui/safe_text.py`; the command line uses it too)
turns control characters into visible symbols. `literal` makes the result a
`Content` that Textual never parses as markup, so `[PATH]`, `[N]` or `[/x]` in a
command's usage, a notice or a pane show as typed. `escape_markup` is for the
few Textual APIs that take only a markup string. `keep_lines` makes a Markdown
renderer keep the line breaks of line-by-line text (STATE, `/context show`).
"""

import re

from textual.content import Content

from slop_tui.safe_text import UNSAFE_CODEPOINTS, has_unsafe, neutralise, neutralise_cells


def literal(text: str, style: str = "") -> Content:
    """Untrusted text as Content: controls neutralised, never read as markup."""
    return Content.styled(neutralise(text), style) if style else Content(neutralise(text))


def escape_markup(text: str) -> str:
    """Untrusted text for an API that parses markup: controls neutralised, `[` escaped."""
    # Every `[`: Textual's own `escape` leaves `[N]` and `[PATH]` alone, and its
    # parser then drops them as tags. A backslash escapes only the `[` right after it.
    return neutralise(text).replace("[", "\\[")


def keep_lines(text: str) -> str:
    """Markdown joins consecutive lines into one paragraph; a hard break (two trailing
    spaces) keeps each line of line-by-line text on its own row. Fenced code and
    table rows are left as they are."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        plain = line.strip() and not fenced and not line.lstrip().startswith("|")
        out.append(line + "  " if plain else line)
    return "\n".join(out)


def keep_state_lines(text: str) -> str:
    """`keep_lines` for the `### STATE` section of an answer only (from its heading to
    the next heading): the model writes STATE line by line; the rest is prose."""
    return state_lines(text)[0]


def state_lines(text: str, in_state: bool = False) -> tuple[str, bool]:
    """`keep_state_lines` for a piece of an answer that may begin inside its STATE
    section (`in_state`, as the previous piece ended); the text and whether it
    ends inside the section. A streamed answer is shown piece by piece."""
    out: list[str] = []
    section: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            if in_state:
                out.append(keep_lines("\n".join(section)))
                section = []
            in_state = line.lstrip("#").strip().upper() == "STATE"
            out.append(line)
        elif in_state:
            section.append(line)
        else:
            out.append(line)
    if in_state:
        out.append(keep_lines("\n".join(section)))
    return "\n".join(out), in_state


__all__ = [
    "UNSAFE_CODEPOINTS",
    "escape_markup",
    "has_unsafe",
    "keep_lines",
    "keep_state_lines",
    "literal",
    "neutralise",
    "neutralise_cells",
    "state_lines",
]


_NUMBERED = re.compile(r"(\d+): ")


def carries_line_numbers(text: str) -> bool:
    """Whether `text` numbers its own lines (`12: code`, as read_file returns a file):
    most of its lines start with a number, and the numbers run one by one."""
    numbers = [m.group(1) for line in text.splitlines() if (m := _NUMBERED.match(line))]
    lines = sum(1 for line in text.splitlines() if line.strip())
    if len(numbers) < 2 or len(numbers) * 2 < lines:
        return False
    values = [int(n) for n in numbers]
    return all(b == a + 1 for a, b in zip(values, values[1:], strict=False))
