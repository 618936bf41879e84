"""Answers rendered by Rich take their colours from the theme (`blocks.markdown_look`)."""

from __future__ import annotations

from rich.color import Color as RichColor
from textual.app import App
from textual.color import Color

from slop_tui.ui.themes import load_themes, register_themes
from slop_tui.ui.widgets.blocks import AnswerBlock, markdown_look

ANSWER = "Call `parse()` first.\n\n```python\nx = 1\n```\n"


class AnswerApp(App):
    def on_mount(self) -> None:
        register_themes(self, load_themes(user_dir=None))

    def compose(self):
        yield AnswerBlock(ANSWER)


def code_background(block: AnswerBlock, width: int) -> RichColor | None:
    """The background of the inline `parse()` in the rendered lines."""
    for strip in block.rendered(width):
        for segment in strip:
            if "parse()" in segment.text:
                return segment.style.bgcolor
    raise AssertionError("inline code not rendered")


def luminance(color: RichColor) -> float:
    r, g, b = color.get_truecolor()
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


async def test_inline_code_follows_the_theme_and_a_switch_redraws_it():
    app = AnswerApp()
    async with app.run_test(size=(60, 12)) as pilot:
        block = app.query_one(AnswerBlock)
        app.theme = "slop-light"
        await pilot.pause()
        light = code_background(block, 50)
        assert light is not None and luminance(light) > 0.8  # a light tint, not black
        background = Color.parse(app.theme_variables["background"])
        assert light.get_truecolor() != (0, 0, 0) and luminance(light) <= background.brightness
        app.theme = "slop-dark"
        await pilot.pause()
        dark = code_background(block, 50)
        assert dark is not None and luminance(dark) < 0.2
        assert markdown_look(app).code_theme == "monokai"
        app.theme = "slop-light"
        await pilot.pause()
        assert markdown_look(app).code_theme == "default"
        assert code_background(block, 50) == light  # the same look, from its cache


DOCUMENTS = [
    ANSWER,
    "# Title\n\nSome *em* and **strong**, ~~gone~~, a [link](http://x.org) and http://y.org.\n",
    "- one\n- two\n  1. nested\n  2. list\n\n> quoted\n> text\n\n---\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "```sql\nSELECT 1;\n```\n\n    indented code\n\n![img](x.png)\n",
]


def test_the_shared_parser_draws_what_richs_own_markdown_draws():
    """`SharedParserMarkdown` parses with one shared parser and sets Rich's attributes by
    hand: a Rich release that adds or renames one shows up here."""
    from rich.console import Console
    from rich.markdown import Markdown as RichMarkdown

    from slop_tui.ui.widgets.rich_markdown import SharedParserMarkdown

    console = Console(width=50, force_terminal=True, color_system="truecolor")
    for source in DOCUMENTS:
        for theme in ("monokai", "default"):
            ours = console.render_lines(SharedParserMarkdown(source, theme), pad=True)
            rich = console.render_lines(
                RichMarkdown(source, hyperlinks=False, code_theme=theme), pad=True
            )
            assert ours == rich, source
    assert set(vars(SharedParserMarkdown("x", "monokai"))) == set(
        vars(RichMarkdown("x", hyperlinks=False))
    )


def test_a_look_follows_the_colours_not_only_the_themes_name():
    """The look is cached by what it is made of: a theme's name that already points
    at new colours (or another app's theme of the same name) gets its own look."""
    from types import SimpleNamespace

    def fake_app(background: str, dark: bool) -> SimpleNamespace:
        variables = {
            "background": background,
            "primary": "#4a90d9",
            "warning": "#ffa62b",
            "text-warning": "#ffa62b",
            "error": "#ba3c5b",
            "text-error": "#ba3c5b",
        }
        return SimpleNamespace(
            theme="one-name",
            theme_variables=variables,
            current_theme=SimpleNamespace(dark=dark),
            console=SimpleNamespace(color_system="truecolor"),
        )

    dark = markdown_look(fake_app("#101010", True))
    light = markdown_look(fake_app("#f8f8f8", False))
    assert dark.key != light.key
    assert dark.code_theme == "monokai" and light.code_theme == "default"
    bg = light.console.get_style("markdown.code").bgcolor
    assert bg is not None and luminance(bg) > 0.8
