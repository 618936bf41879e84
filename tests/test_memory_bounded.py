"""Memory while replies stream: the caches the workspace fills stay within their bounds.

- An answer block that leaves the screen lets go of its drawn lines at once
  (its rendered and styled lines, Textual's lines cache): the app's collector
  freezes what survives a collection, so a block unmounted later would
  otherwise keep them until the next deep collection (ui/collector.py).
- The real app streams a dozen replies from the fake server through the
  `openai` SDK into a seeded session. After every reply the caches with an
  explicit bound are within it, and after the first `WARM` replies (the SDK's
  import, the tokenizer, Textual's and Rich's caches warming up) the traced
  heap's growth per reply (least squares, each point after a collection)
  stays under `PER_REPLY_BYTES`.
- The parser's caches of stored payloads hold at most `PAYLOADS_KEPT` rows, and
  the rows a summary or a compaction reads once (each reply's background summary
  reads a group's) do not enter them.
- SQLite's page cache (up to the ledger's 32 MB `cache_size`, filled by a turn's
  reads) is freed when the app is idle, with the tokenizer.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import statistics
import sys
import tracemalloc

from rich.segment import Segment
from textual._styles_cache import StylesCache
from textual.app import App
from textual.containers import Vertical
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from slop_tui import message_parser
from slop_tui.context import tokens
from slop_tui.context.compaction import format_messages
from slop_tui.context.summaries import standalone_summary_request
from slop_tui.context.tokens import count_cache
from slop_tui.ledger import Ledger
from slop_tui.ui import turns
from slop_tui.ui.themes import load_themes, register_themes
from slop_tui.ui.widgets.blocks import AnswerBlock, RenderedLines
from slop_tui.ui.widgets.conversation import ConversationView
from slop_tui.ui.widgets.gauge import TokenGauge
from slop_tui.workspace import NEXT_PROMPT
from tests.fakeserver import Reply, wait_for
from tests.test_app import project, started  # noqa: F401  (the fixture)
from tests.test_app_actions import finished, make_app, openai_env, seed, submit
from tests.test_context_factories import openai_calls
from tests.test_ui_startup import cold  # noqa: F401  (the fixture)

REPLIES = 12
WARM = 4  # replies before the slope is taken
# Measured here: ~0.6 MiB per reply (0.8 MiB before unmounted blocks let go of their
# lines), the fake server's own record of each request included; most of it is
# strips (bench/results/2026-11-29-memory.md). A ceiling against a cache that grows
# faster than today's, not the product's 0.5 MB target.
PER_REPLY_BYTES = 1024 * 1024


def answer(i: int) -> str:
    """A markdown answer of ~40 lines: headings, a list, a fenced code block."""
    body = [f"## Step {i}", ""]
    for k in range(12):
        body.append(f"Line {k} of answer {i} explains the ledger window and the token gauge.")
    body += ["", "- first item with `code`", "- second item", "", "```python"]
    body += [f"def step_{i}_{k}(x):\n    return x + {k}" for k in range(6)]
    body += ["```", "", f"Done with answer {i}."]
    return "\n".join(body)


def slope(values: list[float]) -> float:
    xs = list(range(len(values)))
    mx, my = statistics.fmean(xs), statistics.fmean(values)
    return sum((x - mx) * (y - my) for x, y in zip(xs, values, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


class AnswersApp(App):
    def on_mount(self) -> None:
        register_themes(self, load_themes(user_dir=None))

    def compose(self):
        yield AnswerBlock(answer(1))
        yield AnswerBlock(answer(2))


async def test_an_unmounted_answer_lets_go_of_its_drawn_lines():
    app = AnswersApp()
    async with app.run_test(size=(80, 60)) as pilot:
        await pilot.pause()
        first, second = app.query(AnswerBlock)
        assert first._lines is not None and first._styled  # drawn: rendered and styled
        assert first._styles_cache._cache
        await first.remove()
        await pilot.pause()
        assert first._lines is None and first._styled is None
        # (A last repaint at width 0 may leave blanks in Textual's cache: no text.)
        assert all(line.cell_length == 0 for line in first._styles_cache._cache.values())
        assert second._lines is not None and second._styled  # the one still shown keeps them


class Churn(App):
    def compose(self):
        yield Vertical(id="box")


async def test_a_removed_widget_leaves_no_drawn_lines_behind():
    """Textual's `StylesCache.get_inner_outer` caches by the StylesCache itself: 1,024
    of them, each with its widget's last drawn lines, would stay alive after their
    widgets went (the `colours-cache-by-colour` patch keys it by the colours)."""
    app = Churn()
    async with app.run_test(size=(60, 20)) as pilot:
        box = app.query_one("#box")
        for i in range(40):
            widget = Static(f"line {i} " * 8, classes=f"c{i % 3}")
            await box.mount(widget)
            await pilot.pause()
            assert widget._styles_cache._cache  # drawn
            await widget.remove()
        del widget
        gc.collect()
        live = {id(w._styles_cache) for w in gc.get_objects() if isinstance(w, Widget)}
        orphans = [c for c in gc.get_objects() if type(c) is StylesCache and id(c) not in live]
        assert len(orphans) <= 2, f"{len(orphans)} StylesCaches outlived their widgets"


async def test_a_removed_widget_lets_go_of_its_lines_while_frozen():
    """The app's collector freezes what survives a collection: a removed widget, garbage
    in reference cycles, is freed only by the next deep collection. What it drew goes
    at its removal (the `removed-lets-go` patch), by reference count."""
    app = Churn()
    async with app.run_test(size=(60, 20)) as pilot:
        box = app.query_one("#box")
        widgets = [Static(f"line {i} " * 8) for i in range(5)]
        await box.mount_all(widgets)
        await pilot.pause()
        assert all(w._styles_cache._cache and len(w._box_model_cache) for w in widgets)
        gc.freeze()  # as the app's collector does between keys
        try:
            await box.remove_children()
            await pilot.pause()
            for widget in widgets:
                assert not widget._styles_cache._cache
                assert not len(widget._box_model_cache)
        finally:
            gc.unfreeze()


def test_a_drawn_line_is_freed_without_the_cycle_collector():
    """Textual answers a strip divided at its own length (every line the compositor
    draws whole) or cropped and extended to itself with the strip, and caches that
    answer in the strip itself: a cycle, which only a collection frees (a deep one
    once the app's collector froze it). The `strips-without-self-cycles` patch gives
    the same answers without caching them."""
    gc.collect()
    gc.disable()
    try:
        for i in range(200):
            strip = Strip([Segment(f"line {i:3}"), Segment(" of text")], 16)
            assert strip.divide([16]) == [strip]
            assert [s.text for s in strip.divide([4, 16])] == ["line", f" {i:3} of text"]
            assert strip.crop_extend(0, 16, None) is strip
            assert strip.crop_extend(0, 20, None).cell_length == 20
        del strip
        left_for_the_collector = gc.collect()
    finally:
        gc.enable()
    assert left_for_the_collector == 0


def lru_bounded(fn: functools._lru_cache_wrapper) -> bool:
    info = fn.cache_info()
    return info.maxsize is not None and info.currsize <= info.maxsize


CACHED_PACKAGES = ("slop_tui", "textual", "rich", "markdown_it")


def function_caches() -> dict[str, functools._lru_cache_wrapper]:
    """Every `functools` cache (`lru_cache`, `cache`) of slop-tui, Textual, Rich and
    markdown-it loaded now, on a module or a class, by name. Found by walking the
    modules: the app's collector freezes them, out of `gc.get_objects()`'s sight."""
    found: dict[int, tuple[str, functools._lru_cache_wrapper]] = {}  # one name each
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in CACHED_PACKAGES:
            continue
        for owner_name, value in list(vars(module).items()):
            spaces = [(owner_name, value)]
            if isinstance(value, type) and value.__module__ == name:
                spaces += [(f"{owner_name}.{k}", v) for k, v in vars(value).items()]
            for label, obj in spaces:
                obj = getattr(obj, "__func__", obj)  # a classmethod or staticmethod
                if isinstance(obj, functools._lru_cache_wrapper):
                    found.setdefault(id(obj), (f"{name}.{label}", obj))
    return dict(found.values())


def unbounded_growth(
    before: dict[str, int], caches: dict[str, functools._lru_cache_wrapper]
) -> list[str]:
    """The caches without a bound that grew since `before` (sizes by name)."""
    return [
        f"{name} ({before.get(name, 0)} -> {fn.cache_info().currsize} entries)"
        for name, fn in caches.items()
        if fn.cache_info().maxsize is None and fn.cache_info().currsize > before.get(name, 0)
    ]


async def test_streamed_replies_leave_the_heap_flat_and_the_caches_within_bounds(
    fake_llm,
    project,  # noqa: F811
    monkeypatch,
):
    openai_env(monkeypatch, fake_llm)
    await seed(project, [(f"question {i}", answer(i)) for i in range(30)])
    served = iter(range(100, 10_000))
    # Every request (the turns, and the background summaries after them) gets a new answer.
    fake_llm.default_reply = lambda req: Reply(text=answer(next(served)), chunk_size=40)
    app = make_app(project)
    heap: list[float] = []
    sizes: dict[str, int] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        view = app.query_one(ConversationView)
        try:
            for i in range(REPLIES):
                text = f"reply number {i}"
                await submit(pilot, text)
                await finished(pilot, text, timeout=180)
                await wait_for(pilot, lambda: not app.turns.phase, timeout=180)
                await pilot.pause()
                gc.collect()
                if i == 1:  # traced from here: the SDK's import and the tokenizer are done
                    tracemalloc.start()
                if i >= WARM:
                    heap.append(tracemalloc.get_traced_memory()[0])
                if i == WARM:  # what the caches hold once warm
                    sizes = {k: f.cache_info().currsize for k, f in function_caches().items()}
                # Explicit bounds, checked after every reply.
                assert view.mounted_blocks <= view.max_blocks
                assert len(count_cache()) <= count_cache().limit
                for widget in app.query(RenderedLines):
                    styled = widget._styled or {}
                    lines = widget.rendered(widget.content_size.width)
                    assert len(styled) <= 2 * len(lines) + 64 + 1
        finally:
            tracemalloc.stop()
    assert lru_bounded(message_parser._loads)
    assert lru_bounded(message_parser._calls_of)
    # A cache with no bound that still fills once warm grows with every reply.
    caches = function_caches()
    assert len(caches) > 50  # the walk finds them (Textual's geometry, Rich's cells, ours)
    growing = unbounded_growth(sizes, caches)
    assert not growing, growing
    growth = slope(heap)
    assert growth < PER_REPLY_BYTES, (
        f"the heap grows {growth / 1024:.1f} KiB per reply after the {WARM}th "
        f"(bound {PER_REPLY_BYTES / 1024:.0f} KiB): {[round(h / 1024) for h in heap]}"
    )


async def test_the_tokenizer_is_released_when_the_app_is_idle_and_the_counts_stay_exact(
    fake_llm,
    project,  # noqa: F811
    cold,  # noqa: F811
    monkeypatch,
):
    openai_env(monkeypatch, fake_llm)
    monkeypatch.setattr(turns, "TOKENIZER_IDLE_S", 0.0)
    await seed(project, [(f"question {i}", answer(i)) for i in range(3)])
    fake_llm.default_reply = Reply(text=answer(7), chunk_size=40)
    app = make_app(project)

    def releasing() -> bool:
        return any(w.group == "tokenizer-release" and not w.is_finished for w in app.workers)

    released: list[int] = []
    release_memory = Ledger.release_memory

    async def counted(self) -> None:
        await release_memory(self)
        released.append(sqlite_memory_used())

    monkeypatch.setattr(Ledger, "release_memory", counted)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        gauge = app.query_one(TokenGauge)
        for n, text in enumerate(("first question", "second question"), start=1):
            await submit(pilot, text)
            await finished(pilot, text, timeout=60)
            await wait_for(pilot, lambda: not app.turns.phase and not releasing(), timeout=60)
            # Built for the turn (once per turn), released once the app is idle.
            assert cold == [1] * n
            assert not tokens.encoding_loaded() and tokens.encoding_ready() is None
            # SQLite's page cache freed with it (what stays: its schema and statements).
            assert len(released) == n and released[-1] < 2 * 2**20, released
            # The gauge is exact without it: what the turn counted is in the count cache.
            assert not gauge.estimated
        shown = gauge.reading
        exact = await app.workspace.plan(next_prompt=NEXT_PROMPT)
        assert cold == [1, 1]  # every text of the request was counted before
        assert shown.total == exact.request_tokens
        assert dict(shown.layers) == exact.layer_tokens()


def sqlite_memory_used() -> int:
    """Bytes SQLite's allocator holds now, process-wide (`sqlite3_memory_used`, of the
    library the `sqlite3` module is linked with)."""
    lib = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lib.sqlite3_memory_used()


async def test_the_ledger_frees_its_page_cache_when_asked(tmp_path):
    ledger = await Ledger.open(tmp_path / "slop.db")
    try:
        async with ledger.transaction() as db:
            await db.executemany(
                "INSERT INTO app_state(key, value) VALUES (?, ?)",
                ((f"k{i}", "x" * 4000) for i in range(4000)),  # ~16 MB of pages
            )
        rows = await ledger._tuples("SELECT value FROM app_state")
        assert len(rows) >= 4000
        del rows
        filled = sqlite_memory_used()
        await ledger.release_memory()
        freed = filled - sqlite_memory_used()
        assert freed > 8 * 2**20, f"{freed / 2**20:.1f} MB of SQLite's memory freed"
        assert await ledger.get_setting("k7") == "x" * 4000  # read again from the file
    finally:
        await ledger.close()


def test_rows_read_once_for_a_summary_stay_out_of_the_parsers_caches():
    rows = [
        openai_calls(i, i, [(f"call_{i}", "read_file", {"path": f"/src/{i}.py"})])
        for i in range(1, 201)
    ]
    before = (message_parser._calls_of.cache_info(), message_parser._loads.cache_info())
    request = standalone_summary_request(rows, "openai")
    boundary = format_messages(rows, max_messages=len(rows))
    assert "[calls: read_file]" in request.messages[-1].text and "read_file" in boundary
    after = (message_parser._calls_of.cache_info(), message_parser._loads.cache_info())
    assert [a.currsize - b.currsize for a, b in zip(after, before, strict=True)] == [0, 0]
    # What an assembly reads is kept, up to the bound.
    for row in rows * 8:
        message_parser.tool_calls(row)
    for fn in (message_parser._calls_of, message_parser._loads):
        assert fn.cache_info().maxsize == message_parser.PAYLOADS_KEPT
        assert lru_bounded(fn)


def test_the_lines_kept_for_unmounted_answers_stay_within_their_bound():
    """The view keeps the rendered lines of answers whose groups a page or End
    unmounted, for the next build of those groups: the most recent
    `UNMOUNTED_ANSWERS_KEPT` only, a message kept again moving to the newest place."""
    from types import SimpleNamespace

    from slop_tui.ui.widgets import conversation

    bound = conversation.UNMOUNTED_ANSWERS_KEPT

    def block(message_id: int):
        rendered = (f"answer {message_id}", 80, "look", [Strip.blank(80)])
        answer = SimpleNamespace(message_id=message_id, rendered_lines=lambda: rendered)
        return SimpleNamespace(answers=lambda: [answer])

    lines = conversation.UnmountedAnswerLines()
    keep = lines.keep
    keep([block(i) for i in range(1, bound + 1)])
    keep([block(1)])  # unmounted again: now the most recent
    keep([block(i) for i in range(bound + 1, 2 * bound)])
    kept = lines.by_message
    assert len(kept) == bound
    assert list(kept) == [1, *range(bound + 1, 2 * bound)]  # 2 .. bound went first
