"""Themes load from TOML, broken files are skipped with one error each, and they ship."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from textual.widgets import Static

from slop_tui.ui.themes import (
    APP_VARIABLES,
    DEFAULT_THEME,
    THEME_SETTING_KEY,
    ThemeFileError,
    app_variable_defaults,
    load_theme_file,
    load_themes,
    pick_theme,
    register_themes,
    save_theme,
    saved_theme,
    shipped_themes_dir,
    user_themes_dir,
)

REPO_THEMES = Path(__file__).resolve().parent.parent / "themes"
SHIPPED = {"slop-dark", "slop-light", "slop-high-contrast"}

GOOD = """
name = "mine"
primary = "#336699"
dark = false
[variables]
gauge-warning = "#ff8800"
"""


def test_every_shipped_theme_loads_with_every_app_variable():
    result = load_themes(None)
    assert result.errors == []
    assert SHIPPED <= set(result.names)
    assert DEFAULT_THEME in result.names
    for theme in result.themes:
        assert set(APP_VARIABLES) <= set(theme.variables), theme.name
        for var in APP_VARIABLES:
            Color.parse(theme.variables[var])
    by_name = {t.name: t for t in result.themes}
    assert by_name["slop-light"].dark is False
    contrast = by_name["slop-high-contrast"]
    assert (contrast.background, contrast.foreground) == ("#000000", "#FFFFFF")


def test_themes_are_package_data_in_the_installed_package():
    packaged = resources.files("slop_tui") / "themes"
    names = {entry.name for entry in packaged.iterdir() if entry.name.endswith(".toml")}
    assert names == {p.name for p in REPO_THEMES.glob("*.toml")}
    assert {f"{n}.toml" for n in SHIPPED} <= names
    assert shipped_themes_dir().is_dir()


def test_load_theme_file_reads_every_field(tmp_path):
    path = tmp_path / "full.toml"
    path.write_text(
        'name = "full"\nprimary = "#010203"\nsecondary = "red"\naccent = "rgb(1,2,3)"\n'
        'warning = "#fff"\nerror = "#f00"\nsuccess = "#0f0"\nforeground = "#eee"\n'
        'background = "#111"\nsurface = "#222"\npanel = "#333"\nboost = "#444"\n'
        "dark = true\nluminosity_spread = 0.2\ntext_alpha = 1\n"
        '[variables]\ngroup-dropped = "#777"\nfooter-key-foreground = "#abc"\n'
    )
    theme = load_theme_file(path)
    assert theme.name == "full" and theme.boost == "#444" and theme.text_alpha == 1.0
    assert theme.variables == {"group-dropped": "#777", "footer-key-foreground": "#abc"}


BROKEN = {
    "syntax.toml": 'name = "syntax"\nprimary = \n',
    "colour.toml": 'name = "colour"\nprimary = "#12345"\n',
    "type.toml": 'name = "type"\nprimary = "#123456"\ndark = "yes"\n',
    "noname.toml": 'primary = "#123456"\n',
    "unknown.toml": 'name = "unknown"\nprimary = "#123456"\nbakground = "#000"\n',
    "varcolour.toml": 'name = "varcolour"\nprimary = "#123456"\n[variables]\ngauge-ok = "greenish"\n',
    "vartypo.toml": 'name = "vartypo"\nprimary = "#123456"\n[variables]\ngauge-warnng = "#fff"\n',
    "range.toml": 'name = "range"\nprimary = "#123456"\ntext_alpha = 2\nbackground = "x"\n',
}


def test_each_broken_file_gives_exactly_one_error_and_the_rest_load(tmp_path):
    for name, text in BROKEN.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "good.toml").write_text(GOOD)
    result = load_themes(tmp_path)
    assert SHIPPED | {"mine"} <= set(result.names)
    assert len(result.errors) == len(BROKEN)
    for name in BROKEN:
        hits = [e for e in result.errors if f"{tmp_path / name}:" in e]
        assert len(hits) == 1, (name, result.errors)
        assert "\n" not in hits[0] and hits[0].endswith("skipped.")
    joined = "\n".join(result.errors)
    assert "TOML syntax error" in joined
    assert "'primary' = '#12345' is not a colour" in joined
    assert "'dark' should be true or false, not a string" in joined
    assert "missing 'name'" in joined
    assert "unknown key 'bakground'" in joined
    assert "unknown variable 'gauge-warnng'" in joined
    # several problems in one file still make one line
    assert any("text_alpha" in e and "'background'" in e for e in result.errors)
    note = result.notification()
    assert note is not None and note.startswith(f"{len(BROKEN)} theme files were skipped:")


def test_load_theme_file_raises_one_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = 3\nprimary = "#000"\n')
    with pytest.raises(ThemeFileError, match="'name' should be a string, not a number"):
        load_theme_file(path)


def test_user_theme_replaces_shipped_and_duplicates_are_reported(tmp_path):
    (tmp_path / "a.toml").write_text('name = "slop-dark"\nprimary = "#ff0000"\n')
    (tmp_path / "b.toml").write_text('name = "slop-dark"\nprimary = "#00ff00"\n')
    result = load_themes(tmp_path)
    dark = next(t for t in result.themes if t.name == "slop-dark")
    assert dark.primary == "#ff0000"
    assert len(result.errors) == 1 and "already defines 'slop-dark'" in result.errors[0]
    assert result.names.count("slop-dark") == 1


def test_missing_user_dir_and_clean_load_have_no_notification(tmp_path):
    result = load_themes(tmp_path / "nope")
    assert result.errors == [] and result.notification() is None


def test_user_themes_dir_follows_the_config_location(tmp_path):
    env = {"SLOP_CONFIG": str(tmp_path / "cfg" / "config.toml")}
    assert user_themes_dir(env) == tmp_path / "cfg" / "themes"


def test_app_variable_defaults_follow_the_theme():
    assert app_variable_defaults() == APP_VARIABLES
    theme = next(t for t in load_themes(None).themes if t.name == "slop-light")
    derived = app_variable_defaults(theme)
    assert derived["gauge-critical"] == theme.error
    assert set(derived) == set(APP_VARIABLES)


def test_pick_theme_prefers_the_first_installed_choice():
    names = ["slop-dark", "slop-light"]
    assert pick_theme(names, None, "slop-light") == ("slop-light", [])
    chosen, warnings = pick_theme(names, "gone", "slop-light")
    assert chosen == "slop-light" and warnings == [
        "Theme 'gone' is not installed; using 'slop-light'."
    ]
    assert pick_theme(names, None, None) == (DEFAULT_THEME, [])


class _FakeLedger:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get_setting(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    async def set_setting(self, key: str, value: str) -> None:
        self.values[key] = value


async def test_theme_choice_round_trips_through_the_ledger_settings():
    ledger = _FakeLedger()
    assert await saved_theme(ledger) is None
    await save_theme(ledger, "slop-light")
    assert ledger.values == {THEME_SETTING_KEY: "slop-light"}
    assert await saved_theme(ledger) == "slop-light"


class _ThemedApp(App):
    CSS = """
    #ok { color: $gauge-ok; } #warn { color: $gauge-warning; } #crit { color: $gauge-critical; }
    #dropped { color: $group-dropped; } #outside { color: $group-outside-window; }
    #summ { color: $group-summarized; } #intr { color: $group-interrupted; }
    """

    def __init__(self) -> None:
        super().__init__()
        register_themes(self, load_themes(None))
        self.theme = DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return app_variable_defaults(self.current_theme)

    def compose(self) -> ComposeResult:
        for wid in ("ok", "warn", "crit", "dropped", "outside", "summ", "intr"):
            yield Static(wid, id=wid)


async def test_app_css_uses_the_variables_of_every_shipped_theme():
    app = _ThemedApp()
    async with app.run_test(size=(40, 10)) as pilot:
        for name in sorted(SHIPPED):
            app.theme = name
            await pilot.pause()
            theme = app.get_theme(name)
            assert theme is not None
            warn = app.query_one("#warn").styles.color
            assert warn == Color.parse(theme.variables["gauge-warning"])
