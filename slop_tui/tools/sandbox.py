"""The OS sandbox `execute_bash` runs in: bubblewrap (`bwrap`), where it can run.

A command the model writes may be hostile (a poisoned file or page in its
context chose it). Inside the sandbox it sees:

- the project folder writable, except its git repositories (every `.git`
  and repository folder `gitdirs.scan` finds, read-only: a hook or
  `core.fsmonitor` written there would run at the user's next `git status`;
  one the command creates is moved out after it, `gitdirs.sweep`) and `.slop/`
  (hidden: the ledger holds every session, the project config could redirect
  a provider);
- the rest of the file system read-only, with the ledger file (wherever
  `--db` put it), slop-tui's config folder (keys, trusted folders), the
  usual credential stores of the home folder (`~/.aws`, `~/.ssh`,
  `~/.netrc`, …) and its shell start-up files and histories (`~/.bashrc`,
  `~/.zsh_history`, …) hidden, each at its resolved path (a dotfiles
  manager's symlink is followed by bwrap too), a private `/tmp` and an empty
  `/run` (no Docker, D-Bus or ssh-agent socket). A hidden folder is an empty
  read-only tmpfs, a hidden file an empty read-only file (`empty_file`; not
  `/dev/null`, which bwrap's `nodev` bind makes unreadable, and git stops
  at a config file it cannot read: `~/.gitconfig` is one of the hidden);
- when the ledger lives in the project, no sibling of it (`-journal`, `-wal`,
  `-shm`) can be created: SQLite would roll a crafted journal into the ledger
  at its next open. Its folder is read-only; in the project root itself an
  empty read-only file stands in for each missing one while the command runs;
- its own PID namespace and a private `/proc`: slop-tui's process, whose
  environment and memory hold the provider keys, does not exist in there;
- an environment without credentials (`shell_env`: every variable named by a
  provider's `api_key_env`, the common cloud and VCS credential names, and
  any value the secret detector recognises);
- no network unless the user allows it (`[tools] shell_network = true`);
- no capabilities, a new session (no controlling terminal: nothing can be
  typed into the user's terminal), killed with slop-tui.

Where bwrap is missing or cannot run (no user namespaces), `Sandbox.available`
is False with the reason; the app says so in the header and in `/stats`, and
every shell call asks for approval whatever the policy (`approval.py`).
`[tools] sandbox = "off"` turns it off (a loosening: the project file cannot
set it unless the folder is trusted). `SLOP_BWRAP` names the bwrap binary.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from slop_tui.context.redact import contains_secret
from slop_tui.tools import bwrap_probe, gitdirs

SANDBOX_MODES = ("auto", "off")

# Variables the shell never gets, besides every `api_key_env` of the configured
# providers and any whose value the secret detector recognises.
SECRET_ENV_NAMES = frozenset(
    {
        "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY",
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
        "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_AUTH_ACCESS_TOKEN", "AZURE_CLIENT_SECRET",
        "GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_PAT", "GITLAB_TOKEN",
        "GL_TOKEN", "CI_JOB_TOKEN", "BITBUCKET_TOKEN", "NPM_TOKEN", "NODE_AUTH_TOKEN",
        "PYPI_TOKEN", "TWINE_PASSWORD", "DOCKER_PASSWORD", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
        "VAULT_TOKEN", "CODECOV_TOKEN", "HEROKU_API_KEY", "DIGITALOCEAN_TOKEN", "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO", "PGPASSWORD", "MYSQL_PWD", "DATABASE_URL",
    }
)  # fmt: skip
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "API_KEY", "CREDENTIAL")
_SECRET_SUFFIXES = ("_KEY", "_PASS", "_PWD", "_AUTH")
# Pagers would only add noise (output is a pipe, stdin is closed); git must never
# wait for credentials.
_ENV_OVERRIDES = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}

# Credential stores in the home folder, hidden from the sandbox when they exist (a
# symlinked one by its target: dotfiles managers link them).
HOME_SECRETS = (
    ".aws", ".ssh", ".gnupg", ".netrc", ".git-credentials", ".docker", ".kube", ".azure",
    ".npmrc", ".pypirc", ".config/gcloud", ".config/gh", ".config/hub", ".config/git/credentials",
    ".terraform.d", ".cargo/credentials", ".cargo/credentials.toml", ".password-store",
    ".local/share/keyrings", ".gitconfig", ".config/git/config", ".pgpass", ".my.cnf",
    ".s3cfg", ".boto", ".oci", ".vault-token", ".config/doctl", ".config/hcloud",
    ".config/rclone", ".config/op", ".config/configstore", ".config/huggingface",
    ".cache/huggingface/token", ".huggingface", ".kaggle", ".databrickscfg", ".gem/credentials",
    ".m2/settings.xml", ".gradle/gradle.properties", ".composer/auth.json",
    ".config/composer/auth.json", ".terraformrc", ".config/pypoetry", ".local/share/python_keyring",
    ".config/stripe", ".config/ngrok", ".fly", ".wrangler", ".netlify", ".vercel",
)  # fmt: skip
# Shell start-up files and histories: where keys are exported and typed.
HOME_STARTUP = (
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
    ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc", ".config/fish",
    ".envrc", ".env", ".bash_history", ".zsh_history", ".history", ".python_history",
    ".node_repl_history", ".psql_history", ".mysql_history", ".sqlite_history",
    ".rediscli_history", ".lesshst", ".viminfo",
)  # fmt: skip
LEDGER_SIBLINGS = ("", "-wal", "-shm", "-journal")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return (
        upper in SECRET_ENV_NAMES
        or any(part in upper for part in _SECRET_PARTS)
        or upper.endswith(_SECRET_SUFFIXES)
    )


def shell_env(
    base: Mapping[str, str] | None = None, secret_names: Iterable[str] = ()
) -> dict[str, str]:
    """The environment a shell tool gets: the user's, minus credentials, plus overrides.

    Removed: the names in `secret_names` (the providers' `api_key_env`), the
    common credential names (`is_secret_name`), and any variable whose value
    holds something the secret detector recognises (`DATABASE_URL` with a
    password, a pasted key under any name).
    """
    env = dict(os.environ if base is None else base)
    extra = {n.upper() for n in secret_names}
    for name, value in list(env.items()):
        if name.upper() in extra or is_secret_name(name) or contains_secret(value):
            del env[name]
    env.update(_ENV_OVERRIDES)
    return env


@dataclass(frozen=True)
class Sandbox:
    """Whether and how shell commands are confined."""

    bwrap: str | None  # a bwrap that ran the probe; None: no sandbox
    reason: str  # why there is none, or what it is
    network: bool = False  # the user allows the shell network access
    hidden: tuple[Path, ...] = field(default=(), compare=False)  # extra paths to hide

    @property
    def available(self) -> bool:
        return self.bwrap is not None

    def describe(self) -> str:
        """One line for `/stats` and the docs."""
        if not self.available:
            return f"no sandbox ({self.reason}): every shell command asks for approval"
        net = "network allowed" if self.network else "no network"
        return f"bubblewrap ({net}; project writable except .git/ and .slop/)"

    def argv(
        self,
        command: Iterable[str],
        *,
        root: Path,
        ledger: Path | None,
        readonly: Iterable[Path] | None = None,
    ) -> list[str]:
        """`command` wrapped in bwrap (see the module docstring for what it sees).

        `readonly`: the project's git repositories to bind read-only (`GitScan.readonly`
        of a scan made just before); None scans now.
        """
        if self.bwrap is None:
            raise RuntimeError("no sandbox is available")
        root = Path(root).resolve()
        if readonly is None:
            readonly = gitdirs.scan(root).readonly
        args = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
        if not self.network:
            args.append("--unshare-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run"]
        if self.network:  # the resolver's files may live under /run
            args += ["--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve"]
        args += ["--bind", str(root), str(root)]
        for repo in readonly:  # -try: a parallel run may have moved a new one away since
            args += ["--ro-bind-try", str(repo), str(repo)]
        slop = root / ".slop"
        if slop.is_dir():
            args += ["--tmpfs", str(slop), "--remount-ro", str(slop)]
        hide = list(self.hidden)
        if ledger is not None:
            db = Path(ledger).resolve()
            hide += [db.with_name(db.name + s) for s in LEDGER_SIBLINGS]
            inside = db.parent.is_relative_to(root) and not db.parent.is_relative_to(slop)
            if db.parent != root and inside:  # (under .slop/ it is hidden already)
                # Its folder read-only: a sibling the command would create (a crafted
                # `-journal`) is rolled back into the ledger when it is next opened.
                args += ["--ro-bind", str(db.parent), str(db.parent)]
            for path in ledger_placeholders(root, db):  # in the root: bwrap creates each
                args += ["--ro-bind", str(empty_file()), str(path)]
        for path in hide:
            path = path.resolve()
            if root.is_relative_to(path) or path.is_relative_to(slop):
                continue  # it holds the project (a test's home folder), or is hidden already
            args += _hide(path)
        args += ["--chdir", str(root), "--", *command]
        return args


_empty_lock = threading.Lock()
_empty: list[Path] = []


def empty_file() -> Path:
    """An empty read-only file of this process (made again if something removed it): what
    the sandbox binds over a file it hides. Removed when the process exits."""
    with _empty_lock:
        if _empty and _empty[0].is_file() and _empty[0].stat().st_size == 0:
            return _empty[0]
        folder = Path(tempfile.mkdtemp(prefix="slop-sandbox-"))
        path = folder / "empty"
        path.touch()
        path.chmod(0o444)
        atexit.register(shutil.rmtree, folder, True)
        _empty[:] = [path]
        return path


def _hide(path: Path) -> list[str]:
    """bwrap arguments that put an empty, read-only thing over `path` (when it exists)."""
    if path.is_symlink() or not path.exists():
        return []
    if path.is_dir():
        return ["--tmpfs", str(path), "--remount-ro", str(path)]
    return ["--ro-bind", str(empty_file()), str(path)]


def ledger_placeholders(root: Path, ledger: Path | None) -> list[Path]:
    """The ledger's missing siblings when it lives in the project root itself: the sandbox
    puts an empty read-only file over each (bwrap creates it, `remove_placeholders`
    takes it away after the command), so the command cannot create one."""
    if ledger is None:
        return []
    db = Path(ledger).resolve()
    if db.parent != Path(root).resolve():
        return []
    return [p for s in LEDGER_SIBLINGS if not os.path.lexists(p := db.with_name(db.name + s))]


def remove_placeholders(paths: Iterable[Path]) -> None:
    """Remove the empty files bwrap left for `ledger_placeholders`."""
    for path in paths:
        try:
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_size == 0:
                path.unlink()
        except OSError:
            continue


def hidden_paths(env: Mapping[str, str], secret_files: Iterable[Path] = ()) -> tuple[Path, ...]:
    """The home folder's credential stores and shell start-up files, and `secret_files`
    (slop-tui's user config and its trusted-folder record), where they exist, by their
    resolved path: a symlinked one is hidden at its target (bwrap follows a link)."""
    home = Path(env.get("HOME") or Path.home())
    out = [home / rel for rel in (*HOME_SECRETS, *HOME_STARTUP)] + [Path(p) for p in secret_files]
    found: list[Path] = []
    for path in out:
        try:
            if path.exists():
                found.append(path.resolve())
        except (OSError, RuntimeError):
            continue
    return tuple(dict.fromkeys(found))


def detect(
    mode: str = "auto",
    env: Mapping[str, str] | None = None,
    *,
    network: bool = False,
    secret_files: Iterable[Path] = (),
) -> Sandbox:
    """The sandbox this machine can run (`mode` "off": none, on purpose), on
    `bwrap_probe.unavailable`'s answer."""
    env = os.environ if env is None else env
    found, why = bwrap_probe.unavailable(mode, env)
    if found is None:
        return Sandbox(None, why or "", network)
    return Sandbox(found, "bubblewrap", network, hidden_paths(env, secret_files))
