"""`slop_tui/ui/textual_fixes.py`: installed explicitly, each patch checking what it
replaces; the fast paths give what Textual gives."""

from __future__ import annotations

import random

from textual.app import App
from textual.document._document import Document
from textual.document._wrapped_document import WrappedDocument
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Static

from slop_tui.ui import textual_fixes as fixes
from tests.fakeserver import wait_for

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
            # Once the side panes are shown (their reveal restyles them, after the first frame).
            await wait_for(pilot, lambda: app.ready or app.startup_error is not None, timeout=60)
            await pilot.pause()
            main = app.workspace_screen  # (the demo's first-run panel may be over it)
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


def test_importing_the_app_puts_in_place_only_the_class_set_up_and_install_the_rest():
    """The patches are put in place by `install()` (SlopApp() calls it); an import puts
    in place only `class-setup-kept`, which must come before the classes it makes."""
    import os
    import subprocess
    import sys

    code = (
        "import slop_tui.ui.app\n"
        "from slop_tui.ui import textual_fixes as f\n"
        "from textual.widgets import TextArea\n"
        "assert f.installed() == ['class-setup-kept'], f.installed()\n"
        "assert TextArea.render_line is f.original(TextArea, 'render_line')\n"
        "f.install()\n"
        "print(','.join(f.installed()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != fixes.PATCHES_OFF_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split(",") == list(dict.fromkeys(p.name for p in fixes.PATCHES))


def test_installing_twice_changes_nothing():
    fixes.install()
    owners = {patch.owner for patch in fixes.PATCHES}
    before = {owner: dict(vars(owner)) for owner in owners}
    assert fixes.install() == fixes.installed()
    assert {owner: dict(vars(owner)) for owner in owners} == before


def test_a_patch_left_out_by_name_gives_textual_its_own_code_back(monkeypatch):
    from textual.timer import Timer

    try:
        fixes.uninstall({"timer-grid"})
        monkeypatch.setenv(fixes.PATCHES_OFF_VARIABLE, "timer-grid, ascii-wrap")
        done = fixes.install()
        assert "timer-grid" not in done and "undo-past-the-end" in done
        assert Timer._run is fixes.original(Timer, "_run")
    finally:
        fixes.install(skip=())
    assert Timer._run is fixes._run_on_the_next_tick


def test_a_patch_whose_target_changed_shape_leaves_textual_alone_and_warns():
    """Textual's code is not what the patch was written for (an upgrade): a warning, and
    the class keeps its own method; the other patches go in."""
    import pytest

    class Target:
        def redraw(self, width: int) -> int:
            return width

    def replacement(self, width: int) -> int:
        return 0

    written_for = fixes.shape_of(Target.redraw)
    fits = fixes._patch("fits", Target, {"redraw": replacement}, written_for)

    class Changed:
        def redraw(self, width: int, height: int) -> int:  # a parameter more
            return width + height

    misfit = fixes._patch("misfit", Changed, {"redraw": replacement}, written_for)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fixes, "PATCHES", (fits, misfit))
        with pytest.warns(RuntimeWarning, match=r"Changed\.redraw is not what the 'misfit'"):
            assert fixes.install(skip=()) == ["fits"]
    assert Target.redraw is replacement
    assert Changed().redraw(2, 3) == 5  # Textual's own, untouched
    fits.uninstall()
    assert Target().redraw(4) == 4


def test_a_shape_is_the_parameters_and_the_names_read():
    def one(self, size):
        return self._width + size

    def renamed_parameter(self, width):
        return self._width + width

    def other_attribute(self, size):
        return self._height + size

    def same(self, size):
        return size + self._width  # the same names in another order

    assert fixes.shape_of(one) == fixes.shape_of(same)
    assert fixes.shape_of(one) != fixes.shape_of(renamed_parameter)
    assert fixes.shape_of(one) != fixes.shape_of(other_attribute)


def test_textuals_late_timer_waits_an_interval_more_than_the_patched_one(monkeypatch):
    """The gain of `timer-grid`: after a tick whose work ran 2.5 intervals, Textual's
    `Timer._run` waits 1.5 intervals for the next one, the patched one 0.5."""
    import textual.timer
    from textual import _time
    from textual.timer import Timer

    from tests.test_ui_frame_pacing import INTERVAL, run_clocked

    # Textual's `_run` sleeps with the `sleep` its module imported: the clocked one too.
    monkeypatch.setattr(textual.timer, "sleep", lambda seconds: _time.sleep(seconds))
    waits = {}
    for label, run in (
        ("textual", fixes.original(Timer, "_run")),
        ("patched", fixes._run_on_the_next_tick),
    ):
        first, second = run_clocked(run, monkeypatch, 2.5 * INTERVAL).ticks
        waits[label] = round((second - first - 2.5 * INTERVAL) / INTERVAL, 6)
    assert waits == {"textual": 1.5, "patched": 0.5}


class _Counter(App):
    def compose(self):  # type: ignore[no-untyped-def]
        yield Static("count 0", id="count")


class _Opaque(Screen):
    DEFAULT_CSS = "_Opaque { background: $background; }"

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static("on top")


class _Translucent(ModalScreen):
    def compose(self):  # type: ignore[no-untyped-def]
        yield Static("on top")


async def test_a_screen_under_an_opaque_one_is_drawn_again_only_once_it_is_back():
    """Under an opaque screen (the command palette) the screen below changes unseen: its
    changes were drawn into every frame of the screen on top (a streamed reply's five a
    second). Under a translucent one they still show through."""
    app = _Counter()
    async with app.run_test(size=(40, 10)) as pilot:
        below = app.screen
        count = below.query_one("#count", Static)
        frames: list[object] = []
        display = app._display

        def recording(screen, renderable) -> None:  # type: ignore[no-untyped-def]
            if renderable is not None:
                frames.append(renderable)
            display(screen, renderable)

        app._display = recording  # type: ignore[method-assign]
        for top, seen in ((_Opaque(), False), (_Translucent(), True)):
            await app.push_screen(top)
            await pilot.pause()
            del frames[:]
            for i in range(1, 4):
                count.update(f"count {i}")
                await pilot.pause()
            assert bool(frames) is seen, type(top).__name__
            app.pop_screen()
            await pilot.pause()
            assert app.screen is below
            assert "count 3" in str(count.render())
            del frames[:]
            count.update("count 0")
            await pilot.pause()
            assert frames  # drawn again once it is on top


class _Header(App):
    CSS = "#group { height: auto; }"

    def compose(self):  # type: ignore[no-untyped-def]
        from textual.containers import Vertical, VerticalScroll

        with VerticalScroll(), Vertical(id="group"):
            yield Static("x")


async def test_a_header_relabelled_with_its_first_layout_still_pending_takes_its_new_height():
    """A group's header is built (its text set, a layout asked for) before it is mounted;
    a reflow measures it before its own request reaches the screen, and the plan's mark
    arrives then, wrapping the text onto a second line. Textual counted no new layout
    request (one was pending), so the box model measured for the old text stayed."""
    from slop_tui.ui.widgets.blocks import update_in_place

    app = _Header()
    async with app.run_test(size=(60, 10)) as pilot:
        await pilot.pause(0.1)
        header = Static("")
        update_in_place(header, "#3 · id 13 · 2 messages")  # before its mount
        assert header._layout_required
        await app.query_one("#group").mount(header, before=0)
        header._layout_required = True  # its own request not yet seen by the screen
        app.screen._refresh_layout()  # a reflow measures it meanwhile
        assert header.size.height == 1
        update_in_place(
            header, "#3 · id 13 · 2 messages · ◌ not sent: waiting for a summary · ! error"
        )
        await pilot.pause(0.3)
        assert header.size.height == 2


class _Panes(App):
    """Panes side by side with padding, borders and gaps; a scrolling one among them."""

    CSS = """
    Horizontal { height: 1fr; }
    #left { width: 20; padding: 1 2; border: round $accent; }
    #middle { width: 1fr; padding: 0 1; }
    #middle Static { margin: 1 0; border: tall $primary; }
    #right { width: 25; background: $panel; }
    """

    def compose(self):  # type: ignore[no-untyped-def]
        from textual.containers import Horizontal, Vertical, VerticalScroll

        with Horizontal():
            with Vertical(id="left"):
                yield Static("left pane\n" * 3)
            with VerticalScroll(id="middle"):
                for i in range(12):
                    yield Static(f"block {i} " * 9 + "\nsecond line")
            with Vertical(id="right"):
                yield Static("right")
        yield Static("a line at the bottom", id="bottom")


def _written(chops, spans, ends) -> list[list[tuple[str, object]]]:  # type: ignore[no-untyped-def]
    """The cells a partial update writes, span by span: (text, style) per segment."""
    lines = []
    for y, x1, x2 in spans:
        segments = []
        for end, (x, strip) in zip(ends[y], chops[y].items(), strict=False):
            if x < x2 and end > x1:  # a chop with cells in the span: it must be there
                assert strip is not None, (y, x)
                cut = strip.crop(max(x1, x) - x, min(end, x2) - x)
                segments.extend((s.text, s.style) for s in cut if s.text)
        lines.append(segments)
    return lines


async def test_the_chops_of_what_shows_write_what_textuals_write():
    """`chops-of-what-shows` renders less than Textual's `_render_chops`, and every cell a
    frame writes is the same: over the whole screen, one widget's region, a scroll's."""
    from textual._compositor import Compositor
    from textual.geometry import Region
    from textual.strip import Strip

    textuals = fixes.original(Compositor, "_render_chops")
    app = _Panes()
    async with app.run_test(size=(90, 30)) as pilot:
        compositor = app.screen._compositor
        middle = app.query_one("#middle")
        middle.scroll_to(y=7, animate=False, immediate=True)
        await pilot.pause()
        rendered: list[str] = []
        render_lines = Widget.render_lines

        def counting(self, crop):  # type: ignore[no-untyped-def]
            rendered.append(type(self).__name__)
            return render_lines(self, crop)

        crops = [
            compositor.size.region,
            middle.region,
            app.query_one("#left").region,
            Region(25, 3, 17, 6),  # cut across widgets, within chops
            Region(0, 28, 90, 2),
        ]
        Widget.render_lines = counting  # type: ignore[method-assign]
        try:
            for crop in crops:
                spans = list(compositor._regions_to_spans([crop]))
                rows = {y for y, _, _ in spans}
                ends = [cut_set[1:] for cut_set in compositor.cuts]
                del rendered[:]
                theirs = textuals(compositor, crop, rows.__contains__)
                their_count = len(rendered)
                del rendered[:]
                ours = fixes._chops_of_what_shows(compositor, crop, rows.__contains__)
                assert _written(ours, spans, ends) == _written(theirs, spans, ends), crop
                if crop != compositor.size.region:
                    assert len(rendered) < their_count, crop
            full = [
                Strip.join(chop.values()).text
                for chop in fixes._chops_of_what_shows(
                    compositor, compositor.size.region, lambda y: True
                )
            ]
            assert full == [
                Strip.join(chop.values()).text
                for chop in textuals(compositor, compositor.size.region, lambda y: True)
            ]
        finally:
            Widget.render_lines = render_lines  # type: ignore[method-assign]


def _own_set_up(cls: type) -> tuple:
    """What DOMNode's class set-up gives `cls`, bindings as (key, [binding, ...])."""
    bindings = sorted(
        (key, list(kept)) for key, kept in cls._merged_bindings.key_to_bindings.items()
    )
    return (cls._reactives, cls._computes, cls._css_type_name, cls._css_type_names, bindings)


def _every_widget_class() -> list[type]:
    from textual.dom import DOMNode

    found, todo = [], [DOMNode]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return found


def test_every_class_set_up_by_class_setup_kept_is_what_textuals_own_set_up_gives():
    """Every widget, screen and app class loaded (Textual's and the app's), set up again
    by Textual's own `__init_subclass__`: the same reactives, computes, CSS type names
    and bindings."""
    import slop_tui.ui.app  # noqa: F401  (the app's widget classes)
    from slop_tui.ui.screens import workspace_sides  # noqa: F401

    assert fixes.CLASS_SETUP_KEPT.installed()
    classes = [c for c in _every_widget_class() if c in fixes._OWN_PARTS]
    assert len(classes) > 60  # Textual's widgets and the app's, made with the patch
    kept = {cls: _own_set_up(cls) for cls in classes}
    own_set_up = fixes.original(fixes.DOMNode, "__init_subclass__").__func__
    fixes.CLASS_SETUP_KEPT.uninstall()
    try:
        for cls in classes:
            own_set_up(
                cls,
                inherit_css=vars(cls)["_inherit_css"],
                inherit_bindings=vars(cls)["_inherit_bindings"],
                inherit_component_classes=vars(cls)["_inherit_component_classes"],
            )
        textuals = {cls: _own_set_up(cls) for cls in classes}
    finally:
        fixes.CLASS_SETUP_KEPT.apply()
    differ = [cls.__qualname__ for cls in classes if kept[cls] != textuals[cls]]
    assert not differ


def test_a_class_made_after_its_base_grew_a_binding_or_a_reactive_sees_them():
    from textual.binding import Binding
    from textual.reactive import reactive

    class Base(Widget):
        BINDINGS = [Binding("x", "one", "One")]

    class First(Base):
        pass

    Base.BINDINGS.append(Binding("y", "two", "Two"))
    Base.late = reactive(0)  # a reactive set on the class after it was made
    Base.compute_late = lambda self: 1

    class Second(Base):
        pass

    assert set(First._merged_bindings.key_to_bindings) == {"x"}
    assert set(Second._merged_bindings.key_to_bindings) == {"x", "y"}
    assert "late" in Second._reactives and "late" not in First._reactives
    assert "late" in Second._computes


def test_classes_made_from_one_base_do_not_share_their_binding_lists():
    """A binding added to one class's list (as `DOMNode.bind` adds to an instance's
    copy of it) reaches neither its base's parsed bindings nor a sibling class."""
    from textual.binding import Binding

    class Base(Widget):
        BINDINGS = [Binding("x", "one", "One")]

    class Left(Base):
        pass

    class Right(Base):
        pass

    Left._merged_bindings.key_to_bindings["x"].append(Binding("x", "other", "Other"))

    class Later(Base):
        pass

    assert [b.action for b in Right._merged_bindings.key_to_bindings["x"]] == ["one"]
    assert [b.action for b in Later._merged_bindings.key_to_bindings["x"]] == ["one"]


def test_textual_widget_classes_are_made_with_class_setup_kept_when_imported_after_it():
    """The workspace command imports this module first: Textual's widget classes, made
    after it, are set up from kept parts; left out by name, Textual keeps its own."""
    import os
    import subprocess
    import sys

    code = (
        "from slop_tui.ui import textual_fixes as f\n"
        "from textual.dom import DOMNode\n"
        "from textual.app import App\n"
        "from textual.widget import Widget\n"
        "from textual.widgets import TextArea\n"
        "print(f.CLASS_SETUP_KEPT.installed(), all(c in f._OWN_PARTS for c in (Widget, App, TextArea)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != fixes.PATCHES_OFF_VARIABLE}
    outputs = []
    for off in ("", "class-setup-kept"):
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, fixes.PATCHES_OFF_VARIABLE: off},
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.split())
    assert outputs == [["True", "True"], ["False", "False"]]
