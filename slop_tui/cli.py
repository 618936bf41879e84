"""Command line: `slop-tui` (the workspace), `slop-tui exec`, `slop-tui ask`.

Exit codes: 0 success, 1 failure, 2 usage error, 128+N stopped by signal N
(SIGTERM, SIGHUP; 130 for Ctrl-C). Every error is one line on stderr; nothing the
user typed is lost (a prompt is in the ledger before any network call).

Everything `exec` and `ask` print goes through one output boundary
(`safe_text.TerminalWriter` on stdout and stderr): stored and model text can
hold escape sequences, and none of them reaches the user's terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slop_tui import __version__
from slop_tui.codecache import loaded_cache_dir, stop_keeping_expressions
from slop_tui.safe_text import TerminalWriter, escape_json

if TYPE_CHECKING:
    from slop_tui.codecache import CacheFile

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--db", default=default, help="ledger file (default ./.slop/slop.db, env SLOP_DB)"
    )
    parser.add_argument("--session", default=default, help="session name (env SLOP_SESSION)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slop-tui",
        description="A terminal workspace for long LLM tasks. Without a subcommand it opens the workspace.",
    )
    parser.add_argument("--version", action="version", version=f"slop-tui {__version__}")
    _global_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command")
    exec_p = sub.add_parser("exec", help="run one slash command headlessly and print its result")
    _global_options(exec_p, suppress=True)
    exec_p.add_argument("line", help='the command, e.g. "/session list"')
    ask_p = sub.add_parser("ask", help="run one whole turn headlessly and print the answer")
    _global_options(ask_p, suppress=True)
    ask_p.add_argument("--provider", help="provider name (see /provider)")
    ask_p.add_argument("--model", help="model name")
    ask_p.add_argument(
        "--approve",
        choices=("none", "reads", "all"),
        default=None,
        help="which tools run without asking (default: reads)",
    )
    ask_p.add_argument("--output", choices=("text", "json"), default="text")
    ask_p.add_argument("prompt", help="what to ask")
    trust_p = sub.add_parser(
        "trust",
        help="trust this folder's .slop/config.toml (it may then set providers, keys and "
        "approvals); a changed file needs trusting again",
    )
    trust_p.add_argument("--revoke", action="store_true", help="forget the trust")
    return parser


def _session(args: argparse.Namespace) -> str | None:
    return getattr(args, "session", None) or os.environ.get("SLOP_SESSION") or None


def _fail(message: str, code: int = EXIT_FAIL) -> int:
    print(f"slop-tui: {message}", file=sys.stderr)
    return code


async def _open_workspace(args: argparse.Namespace):
    """The workspace for --db/--session, or the exit code of a one-line failure."""
    from slop_tui.config import load_config
    from slop_tui.ledger import LedgerError
    from slop_tui.workspace import Workspace

    config = load_config(db=getattr(args, "db", None))
    for warning in config.warnings:
        print(f"slop-tui: warning: {warning}", file=sys.stderr)
    try:
        ws = await Workspace.open(config, _session(args))
    except LedgerError as exc:
        return _fail(str(exc))
    ws.watch_files = False  # one request: the map looks at the files, no watcher
    for r in ws.ledger.recovered:  # a turn of a killed process, finished on open
        print(f"slop-tui: warning: {r.note()}", file=sys.stderr)
    for warning in ws.pop_warnings():  # provider settings, default_provider, ...
        print(f"slop-tui: warning: {warning}", file=sys.stderr)
    return ws


async def _run_exec(args: argparse.Namespace) -> int:
    from slop_tui.commands import dispatch, is_command

    if not is_command(args.line):
        return _fail(
            "exec runs a slash command (e.g. \"/session list\"); use 'ask' to talk to the model.",
            EXIT_USAGE,
        )
    ws = await _open_workspace(args)
    if isinstance(ws, int):
        return ws
    try:
        result = await dispatch(ws, args.line)
        if result.ok and result.send is not None:
            # A command that produces a user message (e.g. /reply GID TEXT) runs that turn.
            from slop_tui.orchestrator import run_headless_turn

            outcome = await run_headless_turn(
                ws,
                result.send,
                approve=ws.config.approve,
                echo=sys.stdout,
                reply_to=result.reply_to,
            )
            return _fail(outcome.error) if outcome.error else EXIT_OK
    finally:
        await ws.close()
    if result.ok:
        if result.text and not (result.page and _paged(ws, result.text)):
            print(result.announcement())
        return EXIT_OK
    return _fail(result.text, result.exit_code)


def _paged(ws, text: str) -> bool:
    """Open `text` in $EDITOR when stdout is a terminal and the text is taller than it
    (seed 000's `/context show`); whether it was shown that way."""
    import shutil

    from slop_tui.commands.base import CommandError, edit_in_editor

    if not sys.stdout.isatty():
        return False
    if len(text.splitlines()) <= shutil.get_terminal_size().lines:
        return False
    try:
        return edit_in_editor(ws, text, ".md") is not None
    except CommandError as exc:
        print(f"slop-tui: {exc}", file=sys.stderr)
        return False


async def _run_ask(args: argparse.Namespace) -> int:
    from slop_tui.ledger import LedgerError
    from slop_tui.orchestrator import run_headless_turn

    ws = await _open_workspace(args)
    if isinstance(ws, int):
        return ws
    config = ws.config
    try:
        outcome = await run_headless_turn(
            ws,
            args.prompt,
            provider=args.provider,
            model=args.model,
            approve=args.approve or config.approve,
            echo=None if args.output == "json" else sys.stdout,
        )
    except LedgerError as exc:  # e.g. a full disk while choosing the provider
        return _fail(str(exc))
    finally:
        await ws.close()
    if args.output == "json":
        # Escapes, not pictures: the JSON parses to exactly what the model sent.
        print(escape_json(json.dumps(outcome.events_json(), indent=2, ensure_ascii=False)))
    if outcome.error:
        return _fail(outcome.error)
    return EXIT_OK


def _run_trust(args: argparse.Namespace) -> int:
    """`slop-tui trust`: the user's explicit yes to the project file as it is now."""
    from slop_tui.config import load_config
    from slop_tui.trust import record_trust, revoke_trust

    config = load_config()
    where = config.user_config_dir or Path.home()
    if args.revoke:
        if not revoke_trust(config.project_root, where):
            return _fail(f"{config.project_root} was not trusted.")
        print(f"slop-tui: {config.project_root} is no longer trusted.")
        return EXIT_OK
    try:
        digest = record_trust(config.project_root, where)
    except FileNotFoundError as exc:
        return _fail(f"{exc}; nothing to trust.")
    held = ", ".join(config.untrusted) or "no setting that needed trust"
    print(
        f"slop-tui: trusted {config.project_config} (sha256 {digest[:12]}…); it sets {held}. "
        "A change to the file needs `slop-tui trust` again."
    )
    return EXIT_OK


def _run_tui(args: argparse.Namespace) -> int:
    from slop_tui.tools import bwrap_probe

    # The sandbox's probe is a process: started now, it runs on another core while
    # Textual and the workspace are imported, and the app takes its result.
    bwrap_probe.start_early(bwrap_probe.find(os.environ))
    try:
        return _run_app(args)
    finally:
        bwrap_probe.discard_early()  # not taken (the sandbox turned off): reaped


def _run_app(args: argparse.Namespace) -> int:
    # First of Textual: its patch of class set-up (`class-setup-kept`) is in place
    # before Textual's widget classes and the app's are made (~17 ms of CPU less).
    from slop_tui.ui import textual_fixes  # noqa: F401
    from slop_tui.ui.startup import defer_for_first_screen

    defer_for_first_screen()  # code highlighting, until the first screen is up
    cache = loaded_cache_dir()
    if cache is not None:
        from slop_tui.ui.textual_fixes import keep_parsed_css
        from slop_tui.ui.widgets.blocks import keep_answer_lines

        keep_parsed_css(cache)  # Textual's CSS parsed once, kept in the user cache
        keep_answer_lines(cache)  # the answers' lines, drawn again without Markdown
    from slop_tui.context.regex import stop_keeping_every_pattern
    from slop_tui.ui.app import run_app

    # The app's code is imported: patterns, named tuples and annotations compiled from
    # here on may be made from the user's text or the project's, and are not kept in
    # the user's shared tables.
    stop_keeping_every_pattern()
    stop_keeping_expressions()
    return run_app(db=args.db, session=_session(args))


_patterns: CacheFile | None = None  # the regular expressions' kept code


def keep_compiled_patterns(folder: Path) -> bool:
    """Regular expressions made from the code kept in `folder` (the user cache), and
    the code of those compiled in this run kept there, written with the dataclass
    code: the context engine's lazy patterns, and every pattern this thread compiles
    until `slop_tui.context.regex.stop_keeping_every_pattern` (the app's code
    imported). False when this Python's `re` does not fit (nothing kept)."""
    from slop_tui.codecache import CacheFile, keep_with_code_cache
    from slop_tui.context import regex

    global _patterns
    if not regex.fits():
        return False
    if _patterns is None:  # once per process
        _patterns = CacheFile(folder / regex.table_name(), regex.valid_key)
        keep_with_code_cache(_patterns)
    return regex.keep_compiled(_patterns) and regex.keep_every_pattern()


def _use_rank_cache() -> None:
    """Keep the tokenizer's parsed rank file in the user cache (0.2 s less CPU at the
    first count of a run; see slop_tui/context/tokens.py). Only the real commands do
    this: tests and embedders that build the encoding leave no file behind."""
    from slop_tui.context.tokens import use_rank_cache

    use_rank_cache(loaded_cache_dir())  # None (no file) inside the project


@contextlib.contextmanager
def terminal_output() -> Iterator[None]:
    """stdout and stderr neutralised (see the module docstring) while the block runs."""
    out, err = sys.stdout, sys.stderr
    writers = TerminalWriter(out), TerminalWriter(err)
    sys.stdout, sys.stderr = writers
    try:
        yield
    finally:
        for writer in writers:
            with contextlib.suppress(Exception):
                writer.finish()
        sys.stdout, sys.stderr = out, err


# Signals that stop `exec` and `ask` the way Ctrl-C does: the running turn is
# cancelled, so a running tool's processes are killed and the partial reply is kept.
STOP_SIGNALS = tuple(
    sig for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if sig
)


def run_stoppable(main: Callable[[], Awaitable[int]]) -> int:
    """`asyncio.run(main())`, ended by SIGTERM or SIGHUP like Ctrl-C: the main task is
    cancelled (every `finally` and cancellation handler runs) and the exit code is
    128 + the signal's number."""
    stopped: list[int] = []

    async def guarded() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(sig: int) -> None:
            if not stopped:
                stopped.append(sig)
                task.cancel()

        installed = []
        for sig in STOP_SIGNALS:
            # Where the loop cannot take a signal handler (no Unix signals, a thread other
            # than the main one, a signal this system lacks) that signal keeps its default.
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop, sig)
                installed.append(sig)
        try:
            return await main()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    try:
        code = asyncio.run(guarded())
    except asyncio.CancelledError:
        if not stopped:
            raise
        code = EXIT_FAIL
    if stopped:
        name = signal.Signals(stopped[0]).name
        print(f"slop-tui: stopped by {name}.", file=sys.stderr)
        return 128 + stopped[0]
    return code


async def _guard_database(run: Callable[[argparse.Namespace], Awaitable[int]], args) -> int:
    """A damaged database (a page that cannot be read) is one line, never a traceback."""
    from slop_tui.ledger import database_problem

    try:
        return await run(args)
    except sqlite3.DatabaseError as exc:
        return _fail(database_problem(exc, getattr(args, "db", None)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    with terminal_output():
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse prints its own usage line
            return int(exc.code or 0) and EXIT_USAGE
    if args.command not in ("exec", "ask", "trust"):
        from slop_tui.ui.collector import hold_full_collections

        hold_full_collections()  # until the first full screen; the app paces them after
        # The workspace, before its first dataclass is made: their methods' code from
        # the user cache (slop_tui/codecache.py, ~70-100 ms of CPU less before the
        # first frame). `exec`, `ask` and `trust` leave no file behind.
        cache = loaded_cache_dir()
        if cache is not None:
            from slop_tui.codecache import use_code_cache

            use_code_cache(cache)
            # Every regular expression's code too, Textual's at its import (~18 ms).
            keep_compiled_patterns(cache)
    _use_rank_cache()
    try:
        if args.command in ("exec", "ask"):
            run = _run_exec if args.command == "exec" else _run_ask
            with terminal_output():
                return run_stoppable(lambda: _guard_database(run, args))
        if args.command == "trust":
            with terminal_output():
                return _run_trust(args)
        return _run_tui(args)
    except KeyboardInterrupt:
        print("slop-tui: cancelled.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
