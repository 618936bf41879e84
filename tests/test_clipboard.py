"""Copy: the system clipboard tool when there is one, OSC 52 otherwise."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from textual.app import App

from slop_tui.ui.clipboard import copy_text, copy_text_async, describe


class RecordingApp(App):
    def __init__(self) -> None:
        super().__init__()
        self.osc52: list[str] = []

    def copy_to_clipboard(self, text: str) -> None:
        self.osc52.append(text)
        super().copy_to_clipboard(text)


class FakeRun:
    def __init__(self, returncodes: dict[str, int] | None = None, hang: set[str] = frozenset()):
        self.returncodes = returncodes or {}
        self.hang = hang
        self.calls: list[tuple[list[str], bytes, float]] = []

    def __call__(self, argv, *, input, stdout, stderr, timeout, check):
        assert stdout is subprocess.DEVNULL and stderr is subprocess.DEVNULL
        self.calls.append((argv, input, timeout))
        tool = argv[0].rsplit("/", 1)[-1]
        if tool in self.hang:
            raise subprocess.TimeoutExpired(argv, timeout)
        return SimpleNamespace(returncode=self.returncodes.get(tool, 0))


def on_path(*tools: str):
    return lambda name: f"/usr/bin/{name}" if name in tools else None


X11 = {"DISPLAY": ":0"}


def test_system_tool_is_used_when_present():
    app, run = RecordingApp(), FakeRun()
    method = copy_text(app, "héllo", which=on_path("xclip", "xsel"), run=run, env=X11)
    assert method == "system:xclip"
    assert run.calls == [(["/usr/bin/xclip", "-selection", "clipboard"], "héllo".encode(), 2.0)]
    assert app.osc52 == [] and app.clipboard == "héllo"  # in-app paste gets it too


def test_wayland_first_and_pbcopy_without_a_display():
    run = FakeRun()
    env = {"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}
    assert copy_text(RecordingApp(), "x", which=on_path("wl-copy", "xclip"), run=run, env=env) == (
        "system:wl-copy"
    )
    assert copy_text(RecordingApp(), "x", which=on_path("pbcopy"), run=FakeRun(), env={}) == (
        "system:pbcopy"
    )


def test_x11_tools_need_a_display():
    app, run = RecordingApp(), FakeRun()
    assert copy_text(app, "x", which=on_path("xclip", "xsel"), run=run, env={}) == "osc52"
    assert run.calls == [] and app.osc52 == ["x"]


def test_a_failing_or_hanging_tool_falls_through():
    app = RecordingApp()
    run = FakeRun(returncodes={"xclip": 1}, hang={"wl-copy"})
    env = {"WAYLAND_DISPLAY": "w", "DISPLAY": ":0"}
    method = copy_text(app, "x", which=on_path("wl-copy", "xclip", "xsel"), run=run, env=env)
    assert method == "system:xsel" and [c[0][0] for c in run.calls] == [
        "/usr/bin/wl-copy",
        "/usr/bin/xclip",
        "/usr/bin/xsel",
    ]


def test_osc52_when_no_tool_works():
    app = RecordingApp()
    run = FakeRun(returncodes={"xclip": 1})
    assert copy_text(app, "payload", which=on_path("xclip"), run=run, env=X11) == "osc52"
    assert app.osc52 == ["payload"]


def test_osc_52_when_the_tool_cannot_start():
    def broken(*args, **kwargs):
        raise OSError("exec format error")

    app = RecordingApp()
    assert copy_text(app, "x", which=on_path("pbcopy"), run=broken, env={}) == "osc52"
    assert app.osc52 == ["x"]


async def test_async_variant_inside_a_running_app():
    app = RecordingApp()
    async with app.run_test():
        assert await copy_text_async(app, "a", which=on_path(), env={}) == "osc52"
        assert await copy_text_async(app, "b", which=on_path("pbcopy"), run=FakeRun(), env={}) == (
            "system:pbcopy"
        )
    assert app.osc52 == ["a"]


def test_describe():
    assert describe("system:xclip") == "Copied to the clipboard (xclip)."
    assert "OSC 52" in describe("osc52")
