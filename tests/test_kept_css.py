"""Textual's parsed CSS kept between starts (`textual_fixes.keep_parsed_css`): a second
process parses none of the CSS the first one parsed, and its screen is the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from textual.color import Color
from textual.css.stylesheet import Stylesheet

from slop_tui.ui import textual_fixes

ROOT = Path(__file__).resolve().parent.parent

# The workspace app started as the command starts it (the kept CSS first), its screen
# once the ledger is shown, and how many CSS texts Textual parsed.
PROBE = """
import asyncio, json, sys, tempfile
from pathlib import Path
from slop_tui.ui import textual_fixes
kept = textual_fixes.keep_parsed_css(sys.argv[1])
from textual.css import stylesheet
parsed = []
parse = stylesheet.parse
def counted(*args, **kwargs):
    parsed.append(args[1][:40])
    return parse(*args, **kwargs)
stylesheet.parse = counted
from slop_tui.ui.app import SlopApp
async def main():
    home = tempfile.mkdtemp()
    app = SlopApp(db=home + "/x.db", user_themes=False, cwd=Path(home), env={"HOME": home})
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            if app.ready:
                break
            await pilot.pause(0.05)
        from slop_tui.ui.palette import PALETTE_SCREEN
        for _ in range(400):  # the palette, built ahead a moment later, parses its CSS too
            if app.is_screen_installed(PALETTE_SCREEN):
                palette = app.get_screen(PALETTE_SCREEN)
                if palette.is_running and palette.query("CommandList"):
                    break
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        shot = app.export_screenshot()
        focused = type(app.focused).__name__
    from slop_tui.codecache import save_code_cache
    save_code_cache()  # as the app does once its first screen is up
    print(json.dumps({"kept": kept, "parsed": len(parsed), "shot": shot, "focused": focused}))
asyncio.run(main())
"""


def run_probe(folder: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "SLOP_CONFIG": str(folder / "none.toml")},
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def css_file(folder: Path) -> Path:
    (path,) = folder.glob("textual-css-*.marshal")
    return path


def test_a_second_start_parses_no_css_and_shows_the_same_screen(tmp_path: Path) -> None:
    first = run_probe(tmp_path)
    assert first["kept"] is True
    assert first["parsed"] > 20  # the app's file, the themes' variables, every DEFAULT_CSS
    written = css_file(tmp_path).read_bytes()
    second = run_probe(tmp_path)
    assert second["parsed"] == 0
    assert second["shot"] == first["shot"]  # the same screen, to the character
    assert second["focused"] == first["focused"]
    assert css_file(tmp_path).read_bytes() == written  # nothing new: not written again


def test_a_damaged_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    first = run_probe(tmp_path)
    path = css_file(tmp_path)
    for damage in (b"", b"\x00not marshal", path.read_bytes()[:200]):
        path.write_bytes(damage)
        again = run_probe(tmp_path)
        assert again["parsed"] == first["parsed"]  # parsed as without the file
        assert again["shot"] == first["shot"]
        assert run_probe(tmp_path)["parsed"] == 0  # and the file is whole again


def test_a_folder_that_cannot_be_written_costs_only_the_parsing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    first = run_probe(blocker / "cache")
    second = run_probe(blocker / "cache")
    assert first["parsed"] > 20 and second["parsed"] == first["parsed"]
    assert second["shot"] == first["shot"]


def _colour_of(variables: dict[str, str]) -> Color:
    sheet = Stylesheet(variables=variables)
    sheet.add_source("Foo { color: $accent; }", read_from=("test.tcss", ""))
    sheet.parse()
    (rule,) = sheet.rules
    return rule.styles.color


def test_rules_are_kept_per_variables_and_a_damaged_entry_is_parsed_again(
    tmp_path: Path,
) -> None:
    try:
        assert textual_fixes.keep_parsed_css(tmp_path)
        table = textual_fixes._css_table
        assert _colour_of({"accent": "red"}) == Color.parse("red")
        assert len(table.table) == 1
        # Other variables: parsed with them, not the rules kept for the first.
        assert _colour_of({"accent": "blue"}) == Color.parse("blue")
        assert len(table.table) == 2
        assert _colour_of({"accent": "red"}) == Color.parse("red")  # from the table
        assert table.unsaved == 2
        for key in table.table:
            table.table[key] = b"\x80damaged"
        assert _colour_of({"accent": "blue"}) == Color.parse("blue")
        assert table.unsaved == 3  # parsed again and put back whole
    finally:
        textual_fixes.forget_parsed_css()
    assert not textual_fixes.KEPT_CSS.installed()
    assert Stylesheet._parse_rules is textual_fixes.original(Stylesheet, "_parse_rules")
