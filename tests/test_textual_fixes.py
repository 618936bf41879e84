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


async def test_a_screen_resumed_the_first_time_keeps_the_styles_of_its_mount():
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
        app = SlopApp(db=":memory:", user_themes=False, blink=False)
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
