"""The soft-wrap fast path of `slop_tui/ui/textual_fixes.py` gives what Textual gives."""

from __future__ import annotations

import random

from textual.document._document import Document
from textual.document._wrapped_document import WrappedDocument

from slop_tui.ui import textual_fixes as fixes

ORIGINAL_OFFSETS = fixes._compute_wrap_offsets
ORIGINAL_TABS = fixes._get_tab_widths


def _line(rnd: random.Random) -> str:
    """Words, runs of spaces, long words; now and then a tab, a control character or
    a wide one (those lines take Textual's own path)."""
    pieces = []
    for _ in range(rnd.randint(0, 14)):
        kind = rnd.random()
        if kind < 0.6:
            pieces.append("w" * rnd.randint(1, 9))
        elif kind < 0.8:
            pieces.append(" " * rnd.randint(1, 4))
        elif kind < 0.9:
            pieces.append("x" * rnd.randint(10, 70))  # longer than narrow lines: folded
        else:
            pieces.append(rnd.choice(["\t", "\x1b", "é", "界", "-", ".,;"]))
    return "".join(pieces)


def test_wrap_offsets_and_tab_widths_match_textuals_on_random_lines():
    rnd = random.Random(20261126)
    fast = 0
    for _ in range(5_000):
        line = _line(rnd)
        fast += fixes._one_cell_each(line)
        assert fixes.fast_tab_widths(line, 4) == ORIGINAL_TABS(line, 4), repr(line)
        for width in (1, 2, 7, rnd.randint(1, 80)):
            for fold in (True, False):
                assert fixes.fast_wrap_offsets(line, width, 4, fold) == ORIGINAL_OFFSETS(
                    line, width, 4, fold
                ), (repr(line), width, fold)
    assert 2_000 < fast < 5_000  # both paths were taken


def test_a_wrapped_document_is_the_same_with_the_fast_path(monkeypatch):
    import textual.document._wrapped_document as wrapped

    rnd = random.Random(7)
    text = "\n".join(_line(rnd) for _ in range(400))

    def wrap(width: int) -> WrappedDocument:
        document = WrappedDocument(Document(text), tab_width=4)
        document.wrap(width, 4)
        return document

    monkeypatch.setattr(wrapped, "compute_wrap_offsets", ORIGINAL_OFFSETS)
    monkeypatch.setattr(wrapped, "get_tab_widths", ORIGINAL_TABS)
    before = {width: wrap(width) for width in (1, 5, 31, 80)}
    fixes.install()
    assert wrapped.compute_wrap_offsets is fixes.fast_wrap_offsets
    for width, old in before.items():
        new = wrap(width)
        assert new._wrap_offsets == old._wrap_offsets
        assert new._offset_to_line_info == old._offset_to_line_info
        assert new._tab_width_cache == old._tab_width_cache
        assert new.lines == old.lines


async def test_a_screen_resumed_the_first_time_keeps_the_styles_of_its_mount(tmp_path):
    """Skipping the first resume's restyle leaves every node styled as a full restyle
    styles it: the workspace's main screen and a dialog over it."""
    from textual.css.stylesheet import Stylesheet

    from slop_tui.ui.app import SlopApp
    from slop_tui.ui.screens.dialogs import ConfirmScreen

    fixes.install()
    updates: list[int] = []
    real_update_nodes = Stylesheet.update_nodes

    def counted(self, nodes, animate=False):
        nodes = list(nodes)
        updates.append(len(nodes))
        return real_update_nodes(self, nodes, animate=animate)

    def styles(screen) -> list[str]:
        return [node.styles.css for node in screen.walk_children(with_self=True)]

    Stylesheet.update_nodes = counted  # type: ignore[method-assign]
    try:
        app = SlopApp(db=str(tmp_path / "slop.db"), user_themes=False, blink=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            main = app.screen
            assert main.__dict__.get("_slop_resumed")
            assert max(updates, default=0) < len(styles(main)) - 1  # no whole-screen restyle
            before = styles(main)
            main.update_node_styles(animate=False)  # what the skipped pass would do
            assert styles(main) == before
            app.push_screen(ConfirmScreen("Empty the trash?", "3 groups"))
            await pilot.pause()
            dialog = app.screen
            before = styles(dialog)
            dialog.update_node_styles(animate=False)
            assert dialog is not main and styles(dialog) == before
    finally:
        Stylesheet.update_nodes = real_update_nodes  # type: ignore[method-assign]


def test_a_strip_makes_its_caches_when_first_used():
    from rich.segment import Segment
    from rich.style import Style
    from textual.cache import FIFOCache
    from textual.strip import Strip

    fixes.install()
    made: list[int] = []
    original = FIFOCache.__init__

    def counting(self, maxsize):  # type: ignore[no-untyped-def]
        made.append(maxsize)
        original(self, maxsize)

    FIFOCache.__init__ = counting  # type: ignore[method-assign]
    try:
        strip = Strip([Segment("hello "), Segment("world", Style(bold=True))], 11)
        assert made == []  # none yet
        assert strip.crop(0, 5).text == "hello"
        assert made == [16]  # the crop cache, at Textual's size
        assert strip.crop(0, 5) is strip.crop(0, 5)  # and it caches
        assert [s.text for s in strip.divide([3, 8, 11])] == ["hel", "lo wo", "rld"]
        assert strip.apply_style(Style(italic=True)).text == "hello world"
        assert strip.cell_length == 11 and strip.text == "hello world"
    finally:
        FIFOCache.__init__ = original  # type: ignore[method-assign]
    try:
        strip.no_such_attribute  # noqa: B018
    except AttributeError as error:
        assert "no_such_attribute" in str(error)
    else:
        raise AssertionError("an unknown attribute must still raise")


async def test_component_styles_are_made_when_read_and_match_textuals():
    from textual.app import App
    from textual.widget import Widget

    class Marked(Widget):
        COMPONENT_CLASSES = {"marked--a", "marked--b", "marked--c"}
        DEFAULT_CSS = """
        Marked > .marked--a { color: red; }
        Marked > .marked--b { background: blue; text-style: bold; }
        Marked.-on > .marked--c { color: green; }
        """

    class MarkedApp(App):
        def compose(self):
            yield Marked()

    fixes.install()
    app = MarkedApp()
    async with app.run_test() as pilot:
        marked = app.query_one(Marked)
        styles = marked._component_styles
        assert isinstance(styles, fixes._ComponentStylesWhenRead)
        assert dict(styles) == {}  # none made at mount
        lazy = marked.get_component_rich_style("marked--b")
        assert set(dict(styles)) == {"marked--b"}  # made on reading
        assert "marked--c" in styles and "marked--x" not in styles
        # Textual's own, made eagerly for the same node, give the same styles.
        fixes._process_component_classes(app.stylesheet, marked)
        assert set(dict(marked._component_styles)) == {"marked--a", "marked--b", "marked--c"}
        assert marked.get_component_rich_style("marked--b") == lazy
        assert marked.get_component_rich_style("marked--a").color.triplet.hex == "#ff0000"
        # A later restyle (a class change) is Textual's: every class made, its rules applied.
        marked.add_class("-on")
        await pilot.pause()
        assert marked.get_component_rich_style("marked--c").color.triplet.hex == "#008000"


async def test_an_empty_text_area_with_no_room_draws_its_placeholder_blank():
    """Content width 0 (the prompt squeezed out during a resize): Textual wrapped the
    placeholder to it and Rich divided by it."""
    from textual.app import App
    from textual.widgets import TextArea

    class Squeezed(App):
        CSS = "TextArea { width: 2; padding: 0 1; border: none; }"

        def compose(self):
            yield TextArea(placeholder="Type a prompt")

    fixes.install()
    app = Squeezed()
    async with app.run_test(size=(20, 5)) as pilot:
        area = app.query_one(TextArea)
        await pilot.pause()
        assert area.content_size.width == 0
        assert area.render_line(0).text == ""  # no room: nothing, and no crash
        area.styles.width = 14
        await pilot.pause()
        assert area.render_line(0).text.startswith("Type a")  # with room, as before
