"""Trust for a project's `.slop/config.toml`.

A project file comes with the folder: a cloned repository ships it, and a
model with file access could write it. Until the user trusts the folder it
may not redirect a provider or loosen anything that guards the user, so
these settings of an untrusted project file are ignored (`sensitive`):

- `[providers.NAME]` `base_url`, `api_key`, `api_key_env`, `project`,
  `location` and `extra.http_options` / `extra.base_url` (where requests,
  with the user's key, go);
- `approve` looser than what the user's own config (or the default) gives;
- `[tools] sandbox = "off"` and `[tools] shell_network = true`;
- `[keymap]` bindings of the approval and confirmation dialogs (`approval_*`,
  `confirm_*`: a binding could make approving a tool call easier);
- `[mcp]`, every MCP server (a stdio server is a program slop-tui starts, an
  HTTP one receives the model's tool arguments);
- `[prices]`, every override (one could price a costly model at nothing, and
  the spending limits would never see it);
- `[budget]` limits higher than the user's own (a project may add a limit
  or lower one, not raise one).

Everything else (models, window, compaction, truncation, theme, ...) applies.

The user trusts a folder once, by a visible action: `slop-tui trust` or the
workspace's "Trust this folder's config" action. The record lives in the
user's config folder (`trusted.json`, next to the user config), keyed by the
folder's resolved path and the SHA-256 of the file: a changed file is
untrusted again until the user trusts it again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRUST_FILE = "trusted.json"
PROJECT_CONFIG = Path(".slop") / "config.toml"
_APPROVE_ORDER = {"none": 0, "reads": 1, "all": 2}
_PROVIDER_KEYS = ("base_url", "api_key", "api_key_env", "project", "location")
_PROVIDER_EXTRA_KEYS = ("http_options", "base_url")
_GUARDED_BINDINGS = ("approval_", "confirm_")  # keymap ids of the dialogs that guard the user

TRUSTED = "trusted"
UNTRUSTED = "untrusted"
CHANGED = "changed"  # trusted once, but the file changed since


@dataclass(frozen=True)
class TrustState:
    status: str  # TRUSTED, UNTRUSTED or CHANGED
    digest: str  # SHA-256 of the file now ("" when it cannot be read)


def trust_file(config_dir: Path) -> Path:
    return Path(config_dir) / TRUST_FILE


def file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _records(config_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads(trust_file(config_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    folders = data.get("folders") if isinstance(data, dict) else None
    return folders if isinstance(folders, dict) else {}


def _key(root: Path) -> str:
    return str(Path(root).resolve())


def trust_state(root: Path, config_dir: Path) -> TrustState:
    """Whether the project file of `root` is trusted as it is now."""
    digest = file_digest(Path(root) / PROJECT_CONFIG)
    record = _records(config_dir).get(_key(root))
    if not isinstance(record, dict) or not digest:
        return TrustState(UNTRUSTED, digest)
    return TrustState(TRUSTED if record.get("sha256") == digest else CHANGED, digest)


def _write_records(config_dir: Path, folders: dict[str, Any]) -> None:
    config_dir = Path(config_dir)
    config_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=config_dir, prefix=".trusted.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"version": 1, "folders": folders}, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, trust_file(config_dir))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record_trust(root: Path, config_dir: Path) -> str:
    """Trust the project file of `root` as it is now; returns its SHA-256.

    Raises FileNotFoundError when the folder has no project file."""
    path = Path(root) / PROJECT_CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"there is no {PROJECT_CONFIG} in {root}")
    digest = file_digest(path)
    folders = _records(config_dir)
    folders[_key(root)] = {
        "sha256": digest,
        "trusted_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    _write_records(config_dir, folders)
    return digest


def revoke_trust(root: Path, config_dir: Path) -> bool:
    """Forget the folder; False when it was not trusted."""
    folders = _records(config_dir)
    if folders.pop(_key(root), None) is None:
        return False
    _write_records(config_dir, folders)
    return True


def sensitive(
    project: Mapping[str, Any],
    base_approve: str,
    base_budget: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The project file's settings without the ones that need trust, and those, described.

    `base_approve` is the approval policy without the project file (the user's
    config or the default); a project `approve` at most as loose is kept.
    `base_budget` is the user's `[budget]`: a project limit is kept when the user
    set none or it is at most the user's.
    """
    kept: dict[str, Any] = {
        k: (dict(v) if isinstance(v, Mapping) else v) for k, v in project.items()
    }
    dropped: list[str] = []
    approve = kept.get("approve")
    if isinstance(approve, str) and _APPROVE_ORDER.get(approve, 0) > _APPROVE_ORDER.get(
        base_approve, 1
    ):
        dropped.append(f'approve = "{approve}"')
        kept.pop("approve")
    providers = kept.get("providers")
    if isinstance(providers, Mapping):
        clean: dict[str, Any] = {}
        for name, entry in providers.items():
            if not isinstance(entry, Mapping):
                clean[name] = entry
                continue
            entry = dict(entry)
            for key in _PROVIDER_KEYS:
                if key in entry:
                    entry.pop(key)
                    dropped.append(f"[providers.{name}] {key}")
            extra = entry.get("extra")
            if isinstance(extra, Mapping):
                extra = dict(extra)
                for key in _PROVIDER_EXTRA_KEYS:
                    if key in extra:
                        extra.pop(key)
                        dropped.append(f"[providers.{name}] extra.{key}")
                entry["extra"] = extra
            clean[name] = entry
        kept["providers"] = clean
    tools = kept.get("tools")
    if isinstance(tools, Mapping):
        if tools.get("sandbox") == "off":
            tools.pop("sandbox")
            dropped.append('[tools] sandbox = "off"')
        if tools.get("shell_network") is True:
            tools.pop("shell_network")
            dropped.append("[tools] shell_network = true")
    network = kept.get("network")
    if isinstance(network, Mapping) and network.get("allow_private") is True:
        network.pop("allow_private")
        dropped.append("[network] allow_private = true")
    mcp = kept.pop("mcp", None)
    if isinstance(mcp, Mapping):
        servers = mcp.get("servers")
        names = list(servers) if isinstance(servers, Mapping) else []
        dropped.extend([f"[mcp.servers.{n}]" for n in names] or ["[mcp]"])
    prices = kept.pop("prices", None)
    if isinstance(prices, Mapping) and prices:
        dropped.extend(
            f"[prices.{n}]" if str(n).isidentifier() else f"[prices.{n!r}]" for n in prices
        )
    budget = kept.get("budget")
    if isinstance(budget, Mapping):
        for key, value in list(budget.items()):
            mine = (base_budget or {}).get(key)
            if mine is not None and value > mine:
                budget.pop(key)
                dropped.append(f"[budget] {key} = {value} (yours is {mine})")
    keymap = kept.get("keymap")
    if isinstance(keymap, Mapping):
        for key in [k for k in keymap if str(k).startswith(_GUARDED_BINDINGS)]:
            keymap.pop(key)
            dropped.append(f"[keymap] {key}")
    return kept, dropped


def untrusted_warning(path: Path, dropped: list[str], state: TrustState) -> str:
    """The one line that says what was ignored and how to trust the folder."""
    why = (
        "it changed since you trusted this folder"
        if state.status == CHANGED
        else "this folder is not trusted"
    )
    return (
        f"{path}: ignored {', '.join(dropped)}: {why}. If you wrote these settings, run "
        "`slop-tui trust` here (or use the workspace's 'Trust this folder's config' action)."
    )
