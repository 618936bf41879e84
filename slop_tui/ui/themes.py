"""Themes as data: `themes/*.toml` validated into `textual.theme.Theme`.

A theme file holds the fields of `textual.theme.Theme` (`name`, `primary`,
`secondary`, `accent`, `warning`, `error`, `success`, `foreground`,
`background`, `surface`, `panel`, `boost`, `dark`, `luminosity_spread`,
`text_alpha`) and a `[variables]` table: the app's own variables
(`APP_VARIABLES`, used in CSS as `$gauge-warning` and so on) and, optionally,
any of Textual's theme variables (`footer-key-foreground`, ...).

Shipped themes live in the top-level `themes/` folder of the repository and
are packaged as `slop_tui/themes/*.toml` (`slop_tui/themes` is a symlink to
`../themes`, so the wheel and an editable install see the same files). User
themes come from `<config dir>/themes/*.toml`. A broken file becomes one
one-line error and is skipped; loading never raises.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

DEFAULT_THEME = "slop-dark"
THEME_SETTING_KEY = "theme"  # app_state key in the ledger for the palette's choice

# The app's own CSS variables and their fallbacks (a dark-friendly palette).
APP_VARIABLES: dict[str, str] = {
    "gauge-ok": "#6CC785",
    "gauge-warning": "#F2C14E",
    "gauge-critical": "#E5616B",
    "group-dropped": "#6B7280",
    "group-outside-window": "#56708F",
    "group-summarized": "#A58BEA",
    "group-interrupted": "#F2A65A",
}

_COLOUR_FIELDS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_FLOAT_FIELDS = ("luminosity_spread", "text_alpha")
_KNOWN_KEYS = {"name", "dark", "variables", *_COLOUR_FIELDS, *_FLOAT_FIELDS}
_MAX_NESTING = 4  # a theme is a flat table plus [variables]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ThemeFileError(ValueError):
    """A theme file could not be used; the message is one line naming the file."""


@dataclass(frozen=True)
class ThemeLoadResult:
    """Themes that loaded (shipped first, then user themes) and one line per skipped file."""

    themes: list[Theme] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.themes]

    def notification(self) -> str | None:
        """All errors as the text of one notification, or None when every file loaded."""
        if not self.errors:
            return None
        count = len(self.errors)
        head = "1 theme file was skipped:" if count == 1 else f"{count} theme files were skipped:"
        return "\n".join([head, *self.errors])


def app_variable_defaults(theme: Theme | None = None) -> dict[str, str]:
    """Defaults for the app's CSS variables; a theme's `[variables]` override them.

    Given the current theme, the gauge colours follow its success / warning /
    error colours, so a user theme that sets only the Textual fields still
    looks coherent. Return this from `App.get_theme_variable_defaults()`.
    """
    values = dict(APP_VARIABLES)
    if theme is not None:
        for var, colour in (
            ("gauge-ok", theme.success),
            ("gauge-warning", theme.warning),
            ("gauge-critical", theme.error),
            ("group-interrupted", theme.accent),
        ):
            if colour:
                values[var] = colour
    return values


@cache
def _textual_variables() -> frozenset[str]:
    """Every variable name Textual's design system knows (valid in [variables])."""
    names = set(Theme(name="probe", primary="#000000").to_color_system().generate())
    for builtin in BUILTIN_THEMES.values():
        names.update(builtin.variables)
    return frozenset(names)


def _describe(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    return names.get(type(value), "a table" if isinstance(value, dict) else "a list")


def _check_colour(key: str, value: object, problems: list[str]) -> str | None:
    if not isinstance(value, str):
        problems.append(f"'{key}' should be a colour string, not {_describe(value)}")
        return None
    try:
        Color.parse(value)
    except ColorParseError:
        problems.append(f"'{key}' = '{value}' is not a colour (try '#RRGGBB')")
        return None
    return value


def _theme_from_data(data: Mapping[str, Any]) -> tuple[Theme | None, list[str]]:
    problems: list[str] = []
    for key in data:
        if key not in _KNOWN_KEYS:
            problems.append(f"unknown key '{key}'")
    name = data.get("name")
    if name is None:
        problems.append("missing 'name'")
    elif not isinstance(name, str):
        problems.append(f"'name' should be a string, not {_describe(name)}")
    elif not _NAME.match(name):
        problems.append(f"'name' = '{name}' may use only letters, digits, '-', '_' and '.'")
    if "primary" not in data:
        problems.append("missing 'primary'")
    kwargs: dict[str, Any] = {}
    for key in _COLOUR_FIELDS:
        if key in data:
            kwargs[key] = _check_colour(key, data[key], problems)
    if "dark" in data:
        if isinstance(data["dark"], bool):
            kwargs["dark"] = data["dark"]
        else:
            problems.append(f"'dark' should be true or false, not {_describe(data['dark'])}")
    for key in _FLOAT_FIELDS:
        if key not in data:
            continue
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"'{key}' should be a number, not {_describe(value)}")
        elif not 0.0 <= value <= 1.0:
            problems.append(f"'{key}' = {value} should be between 0 and 1")
        else:
            kwargs[key] = float(value)
    variables: dict[str, str] = {}
    raw_vars = data.get("variables", {})
    if not isinstance(raw_vars, dict):
        problems.append(f"'variables' should be a table, not {_describe(raw_vars)}")
        raw_vars = {}
    for var, value in raw_vars.items():
        if var in APP_VARIABLES:
            if (colour := _check_colour(f"variables.{var}", value, problems)) is not None:
                variables[var] = colour
        elif var not in _textual_variables():
            problems.append(f"unknown variable '{var}' in [variables]")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"'variables.{var}' should be a non-empty string")
        else:
            variables[var] = value
    if problems:
        return None, problems
    return Theme(name=name, variables=variables, **kwargs), []


def _load(source: Path | Traversable, label: str) -> Theme:
    try:
        data = tomllib.loads(source.read_bytes().decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ThemeFileError(
            f"Theme {label}: TOML syntax error ({_one_line(exc)}); skipped."
        ) from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise ThemeFileError(f"Theme {label}: values nested too deeply to read; skipped.") from None
    except UnicodeDecodeError:
        raise ThemeFileError(f"Theme {label}: not UTF-8 text; skipped.") from None
    except OSError as exc:
        raise ThemeFileError(f"Theme {label}: cannot read it ({exc.strerror}); skipped.") from None
    from slop_tui.config import nesting_depth

    if nesting_depth(data, _MAX_NESTING) > _MAX_NESTING:
        raise ThemeFileError(f"Theme {label}: tables nested too deeply; skipped.")
    theme, problems = _theme_from_data(data)
    if theme is None:
        raise ThemeFileError(f"Theme {label}: {'; '.join(problems)}; skipped.")
    return theme


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def load_theme_file(path: Path | Traversable) -> Theme:
    """Read and validate one theme file; raises `ThemeFileError` with a one-line message."""
    return _load(path, str(path))


def shipped_themes_dir() -> Traversable:
    """`slop_tui/themes` in the installed package, or the repository's `themes/` folder."""
    # The package's own folder when it is one (importlib.resources, for a package
    # inside an archive, costs ~5 ms of CPU to import at every start).
    beside = Path(__file__).resolve().parents[1] / "themes"
    if beside.is_dir() and any(_toml_files(beside)):
        return beside
    from importlib import resources

    packaged = resources.files("slop_tui") / "themes"
    if packaged.is_dir() and any(_toml_files(packaged)):
        return packaged
    return Path(__file__).resolve().parents[2] / "themes"


def user_themes_dir(env: Mapping[str, str] | None = None) -> Path:
    """`<config dir>/themes`, e.g. `~/.config/slop-tui/themes` (follows `$SLOP_CONFIG`)."""
    from slop_tui.config import user_config_dir

    return user_config_dir(env) / "themes"


def _toml_files(folder: Traversable) -> Iterator[Traversable]:
    try:
        entries = sorted(folder.iterdir(), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(".toml") and entry.is_file():
            yield entry


def load_themes(
    user_dir: Path | None = None,
    *,
    shipped_dir: Path | Traversable | None = None,
) -> ThemeLoadResult:
    """Shipped themes, then user themes from `user_dir` (a folder of `*.toml`).

    A user theme with the name of a shipped one replaces it; two user files
    with the same name keep the first. Never raises.
    """
    loaded: dict[str, Theme] = {}
    errors: list[str] = []
    sources: list[tuple[Traversable, bool]] = [(shipped_dir or shipped_themes_dir(), False)]
    if user_dir is not None and user_dir.is_dir():
        sources.append((user_dir, True))
    for folder, is_user in sources:
        seen: set[str] = set()
        for entry in _toml_files(folder):
            label = str(entry) if is_user else entry.name
            try:
                theme = _load(entry, label)
            except ThemeFileError as exc:
                errors.append(str(exc))
                continue
            if theme.name in seen:
                errors.append(
                    f"Theme {label}: another file already defines '{theme.name}'; skipped."
                )
                continue
            seen.add(theme.name)
            loaded.pop(theme.name, None)  # a user theme replaces a shipped one of that name
            loaded[theme.name] = theme
    return ThemeLoadResult(themes=list(loaded.values()), errors=errors)


class _ThemedApp(Protocol):
    def register_theme(self, theme: Theme) -> None: ...


def register_themes(app: _ThemedApp, result: ThemeLoadResult) -> None:
    """Register every loaded theme with the app."""
    for theme in result.themes:
        app.register_theme(theme)


def pick_theme(available: Iterable[str], *wanted: str | None) -> tuple[str, list[str]]:
    """The first wanted theme that exists, else `DEFAULT_THEME`; with a warning per miss.

    Call as `pick_theme(app.available_themes, saved_choice, config.theme)`.
    """
    names = set(available)
    missing: list[str] = []
    found: str | None = None
    for name in wanted:
        if name and name in names:
            found = name
            break
        if name:
            missing.append(name)
    if found is None:
        found = DEFAULT_THEME if DEFAULT_THEME in names else "textual-dark"
    return found, [f"Theme '{name}' is not installed; using '{found}'." for name in missing]


class _Settings(Protocol):
    async def get_setting(self, key: str, default: str | None = None) -> str | None: ...
    async def set_setting(self, key: str, value: str) -> None: ...


async def saved_theme(ledger: _Settings) -> str | None:
    """The theme last chosen in the palette for this project (ledger `app_state`)."""
    return await ledger.get_setting(THEME_SETTING_KEY)


async def save_theme(ledger: _Settings, name: str) -> None:
    """Remember the palette's theme choice for this project."""
    await ledger.set_setting(THEME_SETTING_KEY, name)
