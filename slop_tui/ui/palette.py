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

Importing this module does not import the command table (tens of ms); the
palette built ahead (`build_palette_later`, in a thread) or the first opening
does.

Highlighting a "Theme: <name>" entry previews it once the highlight rests
(PREVIEW_REST); closing the palette without choosing a theme restores the
theme it opened with.

`SlopPalette` is the palette the app opens: over a plain background (Textual's
translucent one blends every cell of the workspace behind it into each of the
palette's frames), its options' heights measured once per text and width
(`MEASURED`) instead of at every opening. The app has one (`kept_palette`), built
while the user pauses after the first screen (`build_palette_later`) and shown
again at every ctrl+p (`KeptCommandPalette` in ui/textual_fixes.py): its first
frame is drawn at once, with the list it had when that is still what an empty
search lists (`listed_now`), else the list follows the frame.
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
from slop_tui.ui.textual_fixes import KeptCommandPalette, mount_ahead

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

    _running = False  # between startup and shutdown: only then does a highlight preview
    _watching: CommandPalette | None = None

    async def startup(self) -> None:
        """Called at every opening (a kept palette starts its providers again)."""
        self.theme_chosen = self._previewing = False
        self.original_theme = self.app.theme
        self.entries = tuple(await self._collect())
        self._running = True
        palette = next(
            (s for s in reversed(self.app.screen_stack) if isinstance(s, CommandPalette)), None
        )
        if palette is not None and palette is not self._watching:
            self._watching = palette  # one watch per palette, however often it opens
            command_list = palette.query_one(CommandList)
            palette.watch(command_list, "highlighted", self._preview, init=False)

    async def _collect(self) -> list[PaletteEntry]:
        produced = self._actions()
        if inspect.isawaitable(produced):
            produced = await produced
        return self._entries(produced)

    def entries_now(self) -> list[PaletteEntry] | None:
        """What `startup` would collect, collected now; None when the app's actions
        are given by a coroutine."""
        produced = self._actions()
        if inspect.isawaitable(produced):
            if inspect.iscoroutine(produced):
                produced.close()
            return None
        return self._entries(produced)

    def _actions(self) -> Any:
        actions = getattr(self.app, "palette_actions", None)
        return actions() if actions is not None else ()

    def _entries(self, actions: Any) -> list[PaletteEntry]:
        # Imported here so that importing this module (for App.COMMANDS) stays cheap.
        from slop_tui.commands import TABLE

        app = self.app
        entries = [PaletteEntry(t, h, cb) for t, h, cb in actions]
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
            self._preview_timer = None
        if not self._running:
            return
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
        self._running = False
        if self._preview_timer is not None:
            self._preview_timer.stop()
            self._preview_timer = None
        if self._previewing and not self.theme_chosen:
            self.app.theme = self.original_theme
        self._previewing = False

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


class SlopPalette(KeptCommandPalette):
    """The command palette over a plain background, its options measured once; one per
    app, made once and shown again at every opening (`kept_palette`)."""

    # Its field is drawn in the palette's first frame (Textual shows it with the list,
    # once every command is gathered: over a plain background the frames before would
    # be empty); the list, hidden until it holds the commands, follows.
    DEFAULT_CSS = """
    SlopPalette { background: $background; }
    SlopPalette:ansi { background: transparent; }
    SlopPalette > Vertical#--container { display: block; }
    """

    def dismiss(self, result=None):  # type: ignore[no-untyped-def]
        # Textual's palette closes, then queues the chosen command: the keys typed
        # behind its Enter wait for the command (ui/keyroute.py, `command_chosen`).
        # Closed with Escape, none is queued: they wait the same two turns for nothing.
        keys = getattr(self.app, "keys", None)
        if keys is not None:
            keys.command_chosen()
        return super().dismiss(result)

    def listed_now(self) -> list[str] | None:
        """The text of each option that a search of the empty field would list now (a
        command's title and help), when every provider is a `SlopCommands`."""
        texts: list[str] = []
        for provider in self._providers:
            entries = provider.entries_now() if isinstance(provider, SlopCommands) else None
            if entries is None:
                return None
            texts.extend(
                entry.title + ("\n" + entry.help if entry.help else "") for entry in entries
            )
        return texts

    def listed(self, commands: list[ListedCommand]) -> list[ListedCommand]:
        listed = []
        for command in commands:
            prompt = command.prompt
            if isinstance(prompt, Content) and not isinstance(prompt, MeasuredOnce):
                prompt = MeasuredOnce(prompt.plain, list(prompt.spans), prompt.cell_length)
                command = ListedCommand(prompt, command.hit, id=command.id)
            listed.append(command)
        return listed


PALETTE_SCREEN = "--command-palette"  # the kept palette's name among the app's screens


def kept_palette(app: Any) -> SlopPalette:
    """The app's one palette (installed as PALETTE_SCREEN at the first call): push it at
    every opening; closed, it stays built for the next."""
    if app.is_screen_installed(PALETTE_SCREEN):
        palette = app.get_screen(PALETTE_SCREEN)
        if isinstance(palette, SlopPalette):
            return palette
        app.uninstall_screen(PALETTE_SCREEN)
    palette = SlopPalette(id=PALETTE_SCREEN)
    app.install_screen(palette, PALETTE_SCREEN)
    return palette


BUILD_AFTER = 0.5  # seconds after the first screen before the palette is built
QUIET_S = 0.2  # ... and once the user has not typed or clicked for this long


def build_palette_later(app: Any) -> None:
    """Build the palette BUILD_AFTER seconds from now, as `build_ahead` does, its
    mounting (~25 ms on the event loop) once the user has paused for QUIET_S
    (`ui.startup.when_user_pauses`). An opening before that builds it."""

    from slop_tui.ui.startup import when_user_pauses

    def mount() -> None:
        if not CommandPalette.is_open(app):  # an opening meanwhile built it
            app.run_worker(partial(mount_ahead, app, kept_palette(app)), group="palette-ahead")

    async def build() -> None:
        await _import_commands()
        when_user_pauses(app, mount, QUIET_S)

    # The coroutine is made when the worker runs: a timer that fires as the app
    # closes starts no worker, and leaves no coroutine never awaited behind.
    app.set_timer(BUILD_AFTER, lambda: app.run_worker(build, group="palette-ahead"))


async def _import_commands() -> None:
    """The command table imported in a thread: the event loop goes on meanwhile."""
    import asyncio
    import importlib

    await asyncio.to_thread(importlib.import_module, "slop_tui.commands")


async def build_ahead(app: Any) -> None:
    """Make the palette before its first opening, so that opening costs what the later
    ones do: the command table imported (in a thread), then the palette mounted,
    styled and laid out, off screen."""
    await _import_commands()
    if app.is_running and not CommandPalette.is_open(app):
        await mount_ahead(app, kept_palette(app))
