"""Rich's Markdown as the conversation draws it: one shared markdown-it parser, and
fenced code drawn plain while highlighting is held (ui/widgets/blocks.py).

Its own module because markdown-it, Rich's Markdown and Pygments (which Rich's
Markdown imports) cost ~35 ms of CPU to import: `blocks` imports this module when
it first renders an answer, not when the conversation pane is imported, so a
first frame with no answer to render (an empty session, or answers whose lines
are kept from the last start) does without them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from markdown_it import MarkdownIt
from rich.markdown import CodeBlock
from rich.markdown import Markdown as RichMarkdown

PARSER = MarkdownIt().enable("strikethrough").enable("table")  # Rich's own configuration
# A parser builds its rule chains at its first parse, which is not safe to race:
# parsed once here, it keeps no state between parses (answers are also rendered
# in worker threads).
PARSER.parse(
    "# a\n\n*b* **c** ~~d~~ `e` [f](g)\n\n> h\n\n- i\n\n1. j\n\n| k |\n|---|\n| l |\n\n```\nm\n```\n"
)


class SharedParserMarkdown(RichMarkdown):
    """Rich's Markdown, parsed by one shared parser.

    Rich builds a new `MarkdownIt` for every document, and with it a
    `LinkifyIt` that compiles its regexes: about 1 ms per answer drawn, at
    every width. Sets the attributes Rich's `__init__` sets (rich 15;
    tests/test_ui_markdown_look.py draws documents both ways and compares them).
    """

    def __init__(self, markup: str, code_theme: str) -> None:
        self.markup = markup
        self.parsed = PARSER.parse(markup)
        self.code_theme = code_theme
        self.justify = None
        self.style = "none"
        self.hyperlinks = False
        self.inline_code_lexer = None
        self.inline_code_theme = code_theme


class _PlainCodeBlock(CodeBlock):
    """A fenced code block in its theme's box, its text not coloured (no lexer)."""

    @classmethod
    def create(cls, markdown: Any, token: Any) -> CodeBlock:
        return cls("text", markdown.code_theme)


class PlainCodeMarkdown(SharedParserMarkdown):
    elements: ClassVar[dict[str, Any]] = {
        **RichMarkdown.elements,
        "fence": _PlainCodeBlock,
        "code_block": _PlainCodeBlock,
    }
