"""What the real app did while a key waited: loaded by bench/screen_trace.py.

Python imports `sitecustomize` at start when this folder is on PYTHONPATH. With
SCREEN_TRACE=FILE in the environment it records, with `time.perf_counter()` (the
system's monotonic clock, the bench's too), into memory:

- `in`: the input thread's read of the terminal (a key arrived);
- `cb`: every event-loop callback over 0.2 ms: its wall time, the main thread's CPU
  time and the time it spent waiting for a core (`schedstat`'s run delay);
- `msg`, `timer`, `layout`, `display`: Textual's message handlers over 0.3 ms,
  timer ticks, layouts and frames drawn;
- `enq`, `write`: a frame handed to Textual's writer thread and written by it, or
  (`write` alone) written at once by the event loop (`frames-written-at-once`);
- `gc`: the app's collections (generation, ms).

SIGUSR2 appends what was recorded to FILE.PID (the bench sends it before it ends
the app). Nothing is recorded without SCREEN_TRACE.
"""

import os
import sys

_OUT = os.environ.get("SCREEN_TRACE")
if _OUT:
    import gc
    import importlib.abc
    import importlib.util
    import json
    import signal
    import threading
    import time

    pc = time.perf_counter
    tt = time.thread_time
    REC: list = []
    add = REC.append

    def _dump(*_) -> None:
        batch = REC[:]
        del REC[: len(batch)]
        with open(f"{_OUT}.{os.getpid()}", "a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in batch))

    signal.signal(signal.SIGUSR2, _dump)
    _sched: list = [None]

    def run_delay() -> float:
        fd = _sched[0]
        if fd is None:
            path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
            fd = _sched[0] = os.open(path, os.O_RDONLY)
        return int(os.pread(fd, 100, 0).split()[1]) / 1e6

    _gc: dict = {}

    def _gc_callback(phase, info) -> None:
        if phase == "start":
            _gc["t"] = pc()
        else:
            t = _gc.get("t", pc())
            add(("gc", t, (pc() - t) * 1e3, info["generation"], info["collected"]))

    gc.callbacks.append(_gc_callback)

    _real_read = os.read

    def _read(fd, n):
        t = pc()
        data = _real_read(fd, n)
        if fd == 0:
            add(("in", t, (pc() - t) * 1e3, len(data)))
        return data

    os.read = _read

    _real_write = os.write
    _main = threading.main_thread()

    def _write(fd, data):
        # A frame written at once by the event loop (`frames-written-at-once`).
        t = pc()
        n = _real_write(fd, data)
        if len(data) > 16 and threading.current_thread() is _main:
            add(("write", t, (pc() - t) * 1e3, n))
        return n

    os.write = _write

    def _what(callback) -> str:
        try:
            owner = getattr(callback, "__self__", None)
            if owner is not None and hasattr(owner, "get_coro"):
                return "task:" + getattr(owner.get_coro(), "__qualname__", "?")
            return getattr(callback, "__qualname__", repr(callback))[:80]
        except Exception:
            return "?"

    import asyncio.events as _events

    _handle_run = _events.Handle._run

    def _run(self) -> None:
        t = pc()
        c = tt()
        r = run_delay()
        _handle_run(self)
        d = pc() - t
        if d > 0.0002:
            add(("cb", t, d * 1e3, (tt() - c) * 1e3, run_delay() - r, _what(self._callback)))

    _events.Handle._run = _run

    def _patch(name: str, mod) -> None:
        if name == "textual.message_pump":
            dispatch = mod.MessagePump._dispatch_message

            async def _dispatch_message(self, message):
                t = pc()
                try:
                    return await dispatch(self, message)
                finally:
                    d = pc() - t
                    if d > 0.0003:
                        add(("msg", t, d * 1e3, type(self).__name__, type(message).__name__))

            mod.MessagePump._dispatch_message = _dispatch_message
        elif name == "textual.timer":
            invoke = mod.invoke

            async def _invoke(callback, *a, **k):
                t = pc()
                try:
                    return await invoke(callback, *a, **k)
                finally:
                    what = getattr(callback, "__qualname__", str(callback))[:60]
                    add(("timer", t, (pc() - t) * 1e3, what))

            mod.invoke = _invoke
        elif name == "slop_tui.ui.textual_fixes":
            install = mod.install

            def _install(*a, **k):
                done = install(*a, **k)
                _after_install()
                return done

            mod.install = _install
        elif name == "slop_tui.ui.widgets.conversation":
            _trace_pager(mod)
        elif name == "textual.app":
            display = mod.App._display

            def _display(self, screen, renderable):
                t = pc()
                try:
                    return display(self, screen, renderable)
                finally:
                    add(("display", t, (pc() - t) * 1e3))

            mod.App._display = _display
        elif name == "textual.drivers._writer_thread":
            made = mod.WriterThread.__init__

            def __init__(self, file) -> None:
                made(self, _Timed(file))

            mod.WriterThread.__init__ = __init__

    class _Timed:
        """The writer thread's file, its writes recorded."""

        def __init__(self, file) -> None:
            self._file = file
            self.encoding = getattr(file, "encoding", "utf-8")
            self.errors = getattr(file, "errors", "strict")
            self.buffer = self
            self._raw = getattr(file, "buffer", None)

        def write(self, data):
            t = pc()
            if isinstance(data, bytes):
                self._file.flush()
                n = self._raw.write(data)
            else:
                n = self._file.write(data)
            add(("write", t, (pc() - t) * 1e3, len(data)))
            return n

        def flush(self) -> None:
            self._file.flush()

        def fileno(self) -> int:
            return self._file.fileno()

        def isatty(self) -> bool:
            return self._file.isatty()

    def _after_install() -> None:
        # Wrapped after slop-tui's patches are in place: they check the shape of what
        # they replace or read, and a wrapper put there first would make them stand aside.
        from textual.drivers._writer_thread import WriterThread
        from textual.screen import Screen

        layout = Screen.__dict__["_refresh_layout"]
        if not getattr(layout, "_traced", False):

            def _refresh_layout(self, size=None, scroll=False):
                t = pc()
                try:
                    return layout(self, size, scroll)
                finally:
                    add(("layout", t, (pc() - t) * 1e3, bool(scroll)))

            _refresh_layout._traced = True
            Screen._refresh_layout = _refresh_layout
        put = WriterThread.__dict__["write"]
        if not getattr(put, "_traced", False):

            def _write(self, text) -> None:
                add(("enq", pc(), len(text)))
                put(self, text)

            _write._traced = True
            WriterThread.write = _write

    _styled = [0]  # lines styled (StylesCache.render_line calls)
    _in_key: list = [None]  # while ctrl+u's frame runs: the widgets it styled

    def _trace_pager(mod) -> None:
        """`pager` events: ctrl+u's own frame (with the view's state at the key: a page
        under way, a layout pending, a batch open), the page's mounts, the preparation
        of the next pages and the styling ahead."""
        pager, styler = mod.GroupPager, mod.PageStyler

        def timed(owner, attr, state=None):
            real = getattr(owner, attr)

            def wrapper(self, *a, **k):
                info = state(self) if state else None
                if info is not None:
                    _in_key[0] = [None]
                t, c, styled = pc(), tt(), _styled[0]
                try:
                    return real(self, *a, **k)
                finally:
                    if info is not None:
                        info["styled"] = _styled[0] - styled
                        info["widgets"] = _in_key[0][1:]
                        _in_key[0] = None
                    add(("pager", t, (pc() - t) * 1e3, attr, (tt() - c) * 1e3, info))

            setattr(owner, attr, wrapper)

        def atimed(owner, attr):
            real = getattr(owner, attr)

            async def wrapper(self, *a, **k):
                t = pc()
                try:
                    return await real(self, *a, **k)
                finally:
                    add(("pager", t, (pc() - t) * 1e3, attr, 0.0, None))

            setattr(owner, attr, wrapper)

        from textual._styles_cache import StylesCache

        render_line = StylesCache.render_line

        def counted(self, *a, **k):
            _styled[0] += 1
            return render_line(self, *a, **k)

        StylesCache.render_line = counted
        render_widget = StylesCache.render_widget

        def render_widget_noted(self, widget, crop):
            before = _styled[0]
            try:
                return render_widget(self, widget, crop)
            finally:
                if _styled[0] != before and _in_key[0]:
                    _in_key[0].append(
                        (type(widget).__name__, _styled[0] - before, widget.region.y, crop.y)
                    )

        StylesCache.render_widget = render_widget_noted

        def key_state(view) -> dict:
            screen = view.screen
            return {
                "queue": len(view.styler.queue),
                "waiting": view.styler._waiting,
                "paging": view._paging,
                "layout": bool(screen._layout_required),
                "batch": view.app._batch_count,
                "lo": view._lo,
                "top": view._tops.get(view._oldest_block()),
                "y": round(view.scroll_y),
            }

        timed(pager, "_oldest_to_the_top", key_state)
        if os.environ.get("SCREEN_TRACE_PROFILE"):  # ctrl+u's frame under cProfile, pooled
            import cProfile

            prof = cProfile.Profile()
            real = pager._oldest_to_the_top

            def profiled(self):
                prof.enable()
                try:
                    return real(self)
                finally:
                    prof.disable()

            pager._oldest_to_the_top = profiled
            dump = _dump

            def _dump_with_profile(*a) -> None:
                dump(*a)
                prof.dump_stats(f"{os.environ['SCREEN_TRACE_PROFILE']}.{os.getpid()}")

            signal.signal(signal.SIGUSR2, _dump_with_profile)
        timed(styler, "_slice")
        atimed(pager, "_prepare")
        atimed(pager, "_page")

    _WANTED = {
        "slop_tui.ui.widgets.conversation",
        "textual.message_pump",
        "textual.timer",
        "slop_tui.ui.textual_fixes",
        "textual.app",
        "textual.drivers._writer_thread",
    }

    class _AfterImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in _WANTED:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            if spec is None or spec.loader is None:
                return None
            exec_module = spec.loader.exec_module

            def _exec(module, exec_module=exec_module, name=name) -> None:
                exec_module(module)
                _patch(name, module)

            spec.loader.exec_module = _exec
            return spec

    sys.meta_path.insert(0, _AfterImport())
