"""The command palette: every app action, every slash command and the theme picker.

`SlopCommands` reads the one command table (`slop_tui.commands.TABLE`), so
the palette cannot drift from `/help`. It relies on four app methods (the
contract; any of them may be `async`):

- `app.palette_actions() -> Iterable[tuple[str, str, Callable[[], Any]]]`:
  (title, help, callback) for each app action; read each time the palette
  opens, so it may depend on what is on screen.
- `app.run_command(text: str)`: run a complete slash command such as
  `"/context show"` exactly as if it had been typed in the prompt.
- `app.prefill_prompt(text: str)`: put text such as `"/session activate "`
  in the prompt, focus it and move the cursor to the end, for commands that
  need arguments.
- `app.choose_theme(name: str)`: keep the theme chosen in the palette (the
  palette has already set `app.theme`); persist it, e.g. with
  `slop_tui.ui.themes.save_theme(ledger, name)`.

Importing this module does not import the command table (that costs
~0.4 s); the first palette opening does.

Highlighting a "Theme: <name>" entry previews it once the highlight rests
(PREVIEW_REST); closing the palette without choosing a theme restores the
theme it opened with.

`SlopPalette` is the palette the app opens: over a plain background (Textual's
translucent one blends every cell of the workspace behind it into each of the
palette's frames), its options' heights measured once per text and width
(`MEASURED`) instead of at every opening.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.cache import LRUCache
from textual.command import (
    Command as ListedCommand,
)
from textual.command import (
    CommandList,
    CommandPalette,
    DiscoveryHit,
    Hit,
    Hits,
    Provider,
)
from textual.content import Content
from textual.css.types import TextOverflow
from textual.visual import RulesMap
from textual.widgets.option_list import OptionDoesNotExist

from slop_tui.ui.text import literal
from slop_tui.ui.textual_fixes import ListedCommandsPalette

if TYPE_CHECKING:
    from slop_tui.commands import Command

THEME_PREFIX = "Theme: "
PREVIEW_REST = 0.3  # seconds the highlight rests on a theme before it is shown
MAX_HITS = 15  # entries a search lists, best first


def needs_arguments(cmd: Command) -> bool:
    """True when the usage names a required argument after the command itself."""
    usage = cmd.usage.strip()
    rest = usage[len(cmd.label) :].strip() if usage.startswith(cmd.label) else ""
    return bool(rest) and not rest.startswith("[")


@dataclass(frozen=True)
class PaletteEntry:
    title: str
    help: str
    callback: Callable[[], Any]


class _ChooseTheme:
    """The callback of a theme entry; its type marks the entry for live preview."""

    def __init__(self, provider: SlopCommands, name: str) -> None:
        self.provider = provider
        self.name = name

    def __call__(self) -> Any:
        app = self.provider.app
        self.provider.theme_chosen = True
        app.theme = self.name
        choose = getattr(app, "choose_theme", None)
        return choose(self.name) if choose is not None else None


class SlopCommands(Provider):
    """Palette provider for slop-tui; put it in `App.COMMANDS`."""

    theme_chosen = False
    _previewing = False
    original_theme = ""
    entries: tuple[PaletteEntry, ...] = ()

    async def startup(self) -> None:
        self.original_theme = self.app.theme
        self.entries = tuple(await self._collect())
        palette = next(
            (s for s in reversed(self.app.screen_stack) if isinstance(s, CommandPalette)), None
        )
        if palette is not None:
            command_list = palette.query_one(CommandList)
            palette.watch(command_list, "highlighted", self._preview, init=False)

    async def _collect(self) -> list[PaletteEntry]:
        # Imported here so that importing this module (for App.COMMANDS) stays cheap.
        from slop_tui.commands import TABLE

        app = self.app
        entries: list[PaletteEntry] = []
        actions = getattr(app, "palette_actions", None)
        if actions is not None:
            produced = actions()
            if inspect.isawaitable(produced):
                produced = await produced
            entries.extend(PaletteEntry(t, h, cb) for t, h, cb in produced)
        run = getattr(app, "run_command", None)
        prefill = getattr(app, "prefill_prompt", None)
        for cmd in TABLE.commands:
            if needs_arguments(cmd):
                if prefill is not None:
                    entries.append(
                        PaletteEntry(cmd.usage, cmd.summary, partial(prefill, cmd.label + " "))
                    )
            elif run is not None:
                entries.append(PaletteEntry(cmd.usage, cmd.summary, partial(run, cmd.label)))
        current = app.theme
        for name in sorted(app.available_themes):
            theme = app.available_themes[name]
            kind = "dark" if theme.dark else "light"
            note = " (current)" if name == current else ""
            entries.append(
                PaletteEntry(
                    THEME_PREFIX + name,
                    f"Switch to the {kind} theme '{name}'{note}; ↑/↓ preview it.",
                    _ChooseTheme(self, name),
                )
            )
        return entries

    _preview_timer = None

    def _preview(self, index: int | None) -> None:
        """Show the highlighted theme once the highlight rests (PREVIEW_REST): a theme
        switch restyles the whole app (~200 ms), and the filter moves the highlight
        under every key ("z" puts "Theme: solarized-dark" first)."""
        if self._preview_timer is not None:
            self._preview_timer.stop()
        self._preview_timer = self.app.set_timer(PREVIEW_REST, partial(self._show_preview, index))

    def _show_preview(self, index: int | None) -> None:
        """Show the highlighted theme; leaving the theme entries restores the original."""
        self._preview_timer = None
        if index is None or self.theme_chosen:
            return
        stack = self.app.screen_stack  # empty once the app has exited under the timer
        palette = stack[-1] if stack else None
        if not isinstance(palette, CommandPalette):
            return
        try:
            option = palette.query_one(CommandList).get_option_at_index(index)
        except OptionDoesNotExist:  # the list was rebuilt under us
            return
        chooser = getattr(getattr(option, "hit", None), "command", None)
        if isinstance(chooser, _ChooseTheme):
            self._previewing = True
            self.app.theme = chooser.name
        elif self._previewing:
            self._previewing = False
            self.app.theme = self.original_theme

    async def shutdown(self) -> None:
        if self._preview_timer is not None:
            self._preview_timer.stop()
        if self._previewing and not self.theme_chosen:
            self.app.theme = self.original_theme

    async def discover(self) -> Hits:
        for entry in self.entries:
            # Titles and help are command text (`/export markdown|json [PATH]`): shown as
            # typed, never parsed as markup (ui/text.py).
            yield DiscoveryHit(
                literal(entry.title), entry.callback, text=entry.title, help=literal(entry.help)
            )

    async def search(self, query: str) -> Hits:
        """Titles by Textual's fuzzy match; the help text by its words ("quit" finds
        /exit). The fuzzy match tries every placement of the query's letters: on a
        long help text that took seconds per key, so help is matched word by word.
        Only the best MAX_HITS are listed: measuring and drawing the list is what a
        key waits for, and a longer list is one more letter away."""
        matcher = self.matcher(query)
        fuzzy = matcher.fuzzy_search
        lowered = query.lower()
        words = lowered.split()
        found: list[tuple[float, int, PaletteEntry, tuple[int, ...]]] = []
        for order, entry in enumerate(self.entries):
            score, offsets = (0.0, ())
            if _in_order(lowered, entry.title.lower()):
                score, offsets = fuzzy.match(query, entry.title)
            if score <= 0 and words and all(word in entry.help.lower() for word in words):
                score, offsets = 0.5 * len(lowered), ()
            if score > 0:
                found.append((score, order, entry, tuple(offsets)))
        found.sort(key=lambda hit: (-hit[0], hit[1]))
        for score, _, entry, offsets in found[:MAX_HITS]:
            display = literal(entry.title)
            for offset in offsets:
                display = display.stylize(matcher.match_style, offset, offset + 1)
            yield Hit(score, display, entry.callback, text=entry.title, help=literal(entry.help))


def _in_order(query: str, text: str) -> bool:
    """Every letter of `query` appears in `text`, in order (what a fuzzy match needs)."""
    index = 0
    for letter in query:
        if letter == " ":
            continue
        index = text.find(letter, index) + 1
        if not index:
            return False
    return True


# -- the palette the app opens --------------------------------------------------------

# An option's height in lines, by (its text, width, line padding, overflow, no wrap):
# what Textual measures by wrapping the text, for every option at every opening.
MEASURED: LRUCache[tuple[str, int, int, TextOverflow, bool], int] = LRUCache(4096)


class MeasuredOnce(Content):
    """A listed command's prompt (title and help) whose height at a width is looked up
    in MEASURED by its text before it is measured. Spans do not change a height."""

    measured = 0  # heights measured (not found in MEASURED), for the tests

    def get_height(self, rules: RulesMap, width: int) -> int:
        key = (
            self.plain,
            width,
            rules.get("line_pad", 0),
            rules.get("text_overflow", "fold"),
            rules.get("text_wrap", "wrap") == "nowrap",
        )
        height = MEASURED.get(key)
        if height is None:
            MeasuredOnce.measured += 1
            height = MEASURED[key] = super().get_height(rules, width)
        return height


class SlopPalette(ListedCommandsPalette):
    """The command palette over a plain background, its options measured once."""

    # Its field is drawn in the palette's first frame (Textual shows it with the list,
    # once every command is gathered: over a plain background the frames before would
    # be empty); the list, hidden until it holds the commands, follows.
    DEFAULT_CSS = """
    SlopPalette { background: $background; }
    SlopPalette:ansi { background: transparent; }
    SlopPalette > Vertical#--container { display: block; }
    """

    def listed(self, commands: list[ListedCommand]) -> list[ListedCommand]:
        listed = []
        for command in commands:
            prompt = command.prompt
            if isinstance(prompt, Content) and not isinstance(prompt, MeasuredOnce):
                prompt = MeasuredOnce(prompt.plain, list(prompt.spans), prompt.cell_length)
                command = ListedCommand(prompt, command.hit, id=command.id)
            listed.append(command)
        return listed
