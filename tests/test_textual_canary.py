"""The canary: every part of Textual that slop-tui patches, subclasses or reads
(`textual_fixes.RELIED_ON`) is the one it was written for.

A Textual upgrade changes some of these sources. The failure names each one and
what depends on it: re-check that patch or helper against the new code (and its
entry in docs/textual-patches.md, and its shape in `textual_fixes.PATCHES`), then
put the new hash here.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from importlib.metadata import version
from typing import Any

from slop_tui.ui import textual_fixes

TEXTUAL = "8.2.8"  # pyproject.toml pins it exactly

# sha256 of `inspect.getsource` (first 16 hex digits) of Textual's own code.
PINNED = {
    "textual.dom.DOMNode.__init_subclass__": "d3f27c3cafeca974",
    "textual.dom.DOMNode._merge_bindings": "33314a4fcf095def",
    "textual.dom.DOMNode._css_bases": "1d9de1338e2ba814",
    "textual.binding.BindingsMap.__init__": "f9e741914c1f55bf",
    "textual.binding.BindingsMap.from_keys": "eeef3d59838d276e",
    "textual.widgets._text_area.TextArea.scroll_cursor_visible": "44534aee08587a81",
    "textual.widgets._text_area.TextArea._undo_batch": "56c81dd074b91368",
    "textual.widgets._text_area.TextArea.render_line": "0fab1cf6e049e371",
    "textual.widgets._text_area.TextArea._on_resize": "7d3b8c615b39bb26",
    "textual.widgets._text_area.TextArea._refresh_size": "dddf5bc75815b9bd",
    "textual.document._wrapped_document.WrappedDocument.wrap": "7e67ba98b0c41976",
    "textual._wrap.compute_wrap_offsets": "3b70f925334dd097",
    "textual.expand_tabs.get_tab_widths": "7f52116b9629a994",
    "textual._compositor.Compositor.__init__": "b90c4793efe4e3a3",
    "textual._compositor.Compositor.reflow": "a08580a81a779473",
    "textual._compositor.Compositor.reflow_visible": "cac5dbc453489329",
    "textual._compositor.Compositor.full_map": "cecfd00ffbfaf055",
    "textual._compositor.Compositor.update_widgets": "86c02b2f8d6d93dd",
    "textual.scroll_view.ScrollView._size_updated": "1606ca15d9392999",
    "textual.widget.Widget._scroll_update": "edb9f6257285830d",
    "textual.screen.Screen._compositor_refresh": "7a40efe563816a06",
    "textual.screen.Screen._on_screen_resume": "f39caa8ec4424d3c",
    "textual.screen.Screen._on_timer_update": "421401660de142c5",
    "textual.screen.Screen._on_idle": "05781131b10da971",
    "textual.screen.Screen._on_layout": "55209a37fad6f883",
    "textual.widget.Widget.refresh": "b1ce3392c9c00870",
    "textual.widget.Widget._get_box_model": "2af27ebacc60142b",
    "textual.widget.Widget._exchange_repaint_regions": "a2d797888f08a6a7",
    "textual._compositor.Compositor.render_update": "772c6b21953aff0e",
    "textual.screen.Screen._refresh_layout": "889715478130b7e0",
    "textual.widget.Widget._size_updated": "21ffb00b8a983315",
    "textual.widget.Widget._check_anchor": "bc36a1643bb91616",
    "textual.timer.Timer._run": "60c942a84c1a8765",
    "textual.timer.Timer.__init__": "8ca147ea690cee4b",
    "textual.strip.Strip.__init__": "ce1d8154dca8cfd7",
    "textual.css.stylesheet.Stylesheet._process_component_classes": "852b5e4b93c6fc25",
    "textual.dom.DOMNode.get_component_styles": "b92de91553e14e0d",
    "textual.app.App._begin_batch": "d3e5faaf577ddb81",
    "textual.app.App._end_batch": "588c75faa310d669",
    "textual.app.App._background_screens": "d925a6b094052092",
    "textual.app.App._display": "4b78dff6669a455c",
    "textual.app.App.copy_to_clipboard": "f3e8b4ade76a09b5",
    "textual._styles_cache.StylesCache": "d4cd25645aa07b66",
    "textual._styles_cache.StylesCache.get_inner_outer": "d2509f3e796680df",
    "textual.widgets._header.HeaderTitle": "f544742d8f4ba44f",
    "textual.message.Message.stop": "512563a145741aea",
    "textual.message_pump.MessagePump._on_message": "12c0b6eb18e5ca10",
    "textual.command.CommandPalette._refresh_command_list": "09d737ad428bd8aa",
    "textual.command.CommandPalette.compose": "055ae3b84d55b382",
    "textual.widget.Widget._message_loop_exit": "f11bec54df4efd84",
    "textual.drivers._writer_thread.WriterThread.write": "bc55e763d1eab88e",
    "textual.drivers._writer_thread.WriterThread.run": "314021aab4f52726",
    "textual.drivers._writer_thread.WriterThread.stop": "e02ca6dd8268a204",
    "textual._xterm_parser.XTermParser.parse": "a5834ad1def86544",
    "textual._parser.Parser.__init__": "a5bf8838a70ae8bb",
    "textual._parser.Parser.feed": "390106cde019dd29",
    "textual.strip.Strip.divide": "f6764f25c39e144b",
    "textual.strip.Strip.crop_extend": "5e83b1f823fcb361",
    "textual.cache.LRUCache": "a4c5ed270a5d4365",
    "textual.widget.Widget.vertical_scrollbar": "6b140a728f0b50e4",
    "textual.scrollbar.ScrollBar.render": "43a56156a9a6cc05",
    "textual.scrollbar.ScrollBarRender.__rich_console__": "39854fc82928d647",
    "textual.css.stylesheet.Stylesheet._parse_rules": "2f1c2d220b672d1b",
    "textual.css.stylesheet.Stylesheet.__init__": "5496b02a203e14ec",
    "textual.command.CommandPalette.__init__": "34776fc490b1e0d1",
    "textual.command.CommandPalette._on_mount": "bc2d41a5bf31dfa3",
    "textual.command.CommandPalette._on_unmount": "7b76ba4abfa3c08b",
    "textual.command.CommandPalette._provider_classes": "fd1b09bf5a970d96",
    "textual.command.CommandPalette._gather_commands": "b91ff7feae77d521",
    "textual.command.CommandPalette._cancel_gather_commands": "968b333f70cecb42",
    "textual.command.CommandPalette._stop_busy_countdown": "b8b5e29bff4086fe",
    "textual.command.CommandPalette._stop_no_matches_countdown": "ab26b55062318399",
    "textual.command.CommandPalette._select_command": "f3b36ccc70265f08",
    "textual.command.Provider._post_init": "fa1b499d78dbb02c",
    "textual.command.Provider._search": "e486f5dc2e967b82",
    "textual.command.Provider._shutdown": "e7b1b582175a528c",
    "textual.screen.Screen._on_mount": "cb1b86109ec4e884",
    "textual.widget.Widget._on_mount": "cac7d1e505b26a11",
    "textual.app.App._get_screen": "e253c005c0065e23",
    "textual.command.CommandPalette._watch__show_busy": "20c16f13ec9c5629",
    "textual.widgets._loading_indicator.LoadingIndicator._on_mount": "fd9eceb436842df2",
    "textual.app.App.refresh_css": "ecfa14bd0d19dba0",
    "textual._compositor.Compositor._render_chops": "ca8c3359d7afd017",
    "textual._compositor.Compositor.cuts": "205385a66fdabffe",
    "textual._compositor.Compositor.visible_widgets": "6eddec5f271628f7",
    "textual.widget.Widget._check_refresh": "ad1c8196be9747bf",
}


def _textuals_own(path: str) -> Any:
    """The object `path` names, as Textual defines it (before any patch)."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        break
    if split == len(parts):
        return obj
    for name in parts[split:-1]:
        obj = getattr(obj, name)
    found = textual_fixes.original(obj, parts[-1])
    return found.fget if isinstance(found, property) else found


def _digest(obj: Any) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


def test_the_pinned_textual_is_installed():
    assert version("textual") == TEXTUAL, (
        f"Textual {version('textual')} is installed, slop-tui's fixes were written for "
        f"{TEXTUAL}: see tests/test_textual_canary.py and docs/textual-patches.md"
    )


def test_every_relied_on_part_is_pinned():
    assert set(PINNED) == set(textual_fixes.RELIED_ON)


def test_every_relied_on_part_of_textual_is_unchanged():
    changed = [
        f"{path} ({textual_fixes.RELIED_ON[path]})"
        for path, pinned in PINNED.items()
        if _digest(_textuals_own(path)) != pinned
    ]
    assert not changed, (
        f"Textual's source changed since {TEXTUAL} in:\n  "
        + "\n  ".join(changed)
        + "\nRe-check what depends on each (slop_tui/ui/textual_fixes.py, "
        "docs/textual-patches.md), measure the patch again, then update PINNED."
    )


def test_every_patch_finds_the_shape_it_was_written_for():
    patches = [*textual_fixes.PATCHES, textual_fixes.KEPT_CSS]
    misfits = [patch.name for patch in patches if not patch.fits()]
    assert not misfits, f"patches that would be left out on this Textual: {misfits}"


def test_every_patched_attribute_is_relied_on():
    """What a patch replaces has its source pinned above."""
    for patch in [*textual_fixes.PATCHES, textual_fixes.KEPT_CSS]:
        for attr, original in patch.originals().items():
            if attr == "__getattr__":  # added to Strip, not replaced
                continue
            if isinstance(original, property):
                original = original.fget
            original = getattr(original, "__func__", original)  # a classmethod's function
            path = f"{original.__module__}.{original.__qualname__}"
            assert path in textual_fixes.RELIED_ON, path
