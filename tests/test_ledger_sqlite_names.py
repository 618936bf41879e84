"""SQLite's `:memory:` and `file:` names are refused wherever a ledger path is taken.

Passed on as a path, SQLite would create a file literally named `:memory:` in the
current folder (one was once committed at the repository's root). The ledger is a
file on purpose (docs/configuration.md, "The ledger file"), so these names get one
clear line and nothing is created.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from slop_tui.config import load_config
from slop_tui.ledger import Ledger, LedgerError
from slop_tui.workspace import Workspace
from tests.test_cli import run as run_cli

ROOT = Path(__file__).resolve().parent.parent
NAMES = [":memory:", "file::memory:?cache=shared", "file:slop.db"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "config")}  # no user config is read


def _created(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _assert_refusal(message: str) -> None:
    assert "\n" not in message
    assert message.startswith("the ledger must be a file, not SQLite's")
    assert "nothing was created" in message and "--db" in message


@pytest.mark.parametrize("name", NAMES)
async def test_ledger_open_refuses_sqlite_names_and_creates_nothing(
    name, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for path in (name, tmp_path / name, Path("sub") / name):
        with pytest.raises(LedgerError) as info:
            await Ledger.open(path)
        _assert_refusal(str(info.value))
    assert _created(tmp_path) == []


async def test_a_folder_merely_named_like_a_uri_part_still_opens(tmp_path) -> None:
    """Only the file's own name is looked at: a folder called `file:x` is fine."""
    path = tmp_path / "file:x" / "slop.db"
    led = await Ledger.open(path)
    await led.close()
    assert path.exists()


async def test_workspace_open_refuses_memory_from_config_and_env(tmp_path) -> None:
    for config in (
        load_config(db=":memory:", cwd=tmp_path, env=_env(tmp_path)),
        load_config(cwd=tmp_path, env={**_env(tmp_path), "SLOP_DB": ":memory:"}),
    ):
        with pytest.raises(LedgerError) as info:
            await Workspace.open(config)
        _assert_refusal(str(info.value))
    assert _created(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["exec", "--db", ":memory:", "/session list"], {}),
        (["exec", "/session list"], {"SLOP_DB": ":memory:"}),
        (["ask", "--db", ":memory:", "hello"], {}),
    ],
    ids=["--db", "SLOP_DB", "ask"],
)
def test_the_cli_refuses_memory_in_one_line(args, env, tmp_path) -> None:
    r = run_cli(args, tmp_path, env)
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    line = r.stderr.strip()
    assert line.startswith("slop-tui: ")
    _assert_refusal(line.removeprefix("slop-tui: "))
    assert _created(tmp_path) == []


async def test_the_app_shows_the_refusal_and_creates_nothing(tmp_path) -> None:
    from textual.widgets import Static

    from slop_tui.ui.app import SlopApp

    app = SlopApp(db=":memory:", cwd=tmp_path, env=_env(tmp_path), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(100):
            if app.startup_error is not None:
                break
            await pilot.pause(0.05)
        assert app.startup_error is not None and app.workspace is None
        _assert_refusal(app.startup_error)
        assert "must be a file" in str(app.query_one("#banner", Static).render())
    assert _created(tmp_path) == []


def test_no_file_named_memory_in_the_repository() -> None:
    """Neither tracked nor left at the root by a test (tests/conftest.py also fails the
    test during which one appears)."""
    assert not (ROOT / ":memory:").exists()
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if tracked.returncode != 0:  # not a git checkout (an sdist): nothing is tracked
        return
    assert not [p for p in tracked.stdout.split("\0") if Path(p).name == ":memory:"]
