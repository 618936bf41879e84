"""The running workspace: the ledger, the current session and process-wide settings.

Per seed 001, the active skills and the request throttle belong to the
workspace, not to a session: switching sessions keeps them. They are stored
in the ledger's `app_state` so a restart keeps them too, together with the
last used session (auto-restore, seed 003).

`Workspace.plan()` is the one function that reads the ledger for a request and
builds its context plan (`context.plan.build_plan`): window, the rows between
the last usable summary and the window, the lane's valid summaries, STATE,
scratchpad, memos, the `/file add` files, the `## Resuming` layer (first turn
after a resume only, rebuilt from today's ledger), the quoted reply and the
focus note. `prompt()` is its request; `display_plan()` the same plan for the
panes (and, with `edit=`, a projection: the ledger read as if the edit were
made).

Handoffs: `open` and `switch_session` look up the session's newest
unconsumed handoff (`pending_resume`, injected until a turn's answer consumes
it: `resume_consumed`); `switch_session` records one for the session it
leaves. The `exit` handoff is the orchestrator's: it records one when it
closes after a turn ran (`Orchestrator.aclose`, which the app and
`slop-tui ask` both call). Turn state (the running group, whether a turn ran)
is the orchestrator's `TurnState`; the workspace reads a running turn from the
ledger's in-flight record (`Ledger.running_here`).

Token counts at start-up: `display_plan` builds the plan for the panes
without the tokenizer (building it costs ~0.4 s of CPU,
see slop_tui/context/tokens.py). Messages carry the counts stored when they
were written; the few other texts (system, STATE, scratchpad, memos, tool
declarations, ...) take their counts from a cache the workspace keeps in the
ledger (`KEY_TOKEN_COUNTS`: the counts of the last exactly shown request), and
any text not in it is estimated and the result says so.

Settings that can be wrong in a config file (`[compaction]`, `[models]`,
`[context] layout`) are read through `compaction_settings`, `model_info` and
`context_settings`: a bad value gives a one-line warning (`warnings`, shown
once by the orchestrator) and the defaults, never an exception.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from slop_tui.config import Config

# The context engine (assemble, budget, guards, layout, plan, prompt) is imported
# where a method builds or reads a plan, not here: opening the workspace and the
# app's first frame need none of it (it was ~45 ms of CPU at every start). The memos'
# checks and the token counter are small, and `open` uses them.
from slop_tui.context.memos import (
    extract_keywords,
    instruction_shaped,
    latest_user_text,
    rank_memos,
)
from slop_tui.context.tokens import O200K_SHA256, DisplayCount, TokenCounter, count_cache
from slop_tui.ledger import Ledger, LedgerError, check_session_name, lane_group
from slop_tui.pricing import (
    BUDGET_OK,
    BudgetCheck,
    Rates,
    check_budget,
    parse_overrides,
    price_call,
    spend_text,
)
from slop_tui.records import (
    DEFAULT_SESSION,
    PURPOSE_CACHE,
    PURPOSE_TURN,
    STATUS_COMPLETED,
    STATUS_ERROR,
    Changed,
    Handoff,
    ImageRef,
    Message,
    Session,
    SessionSummary,
    Skill,
    Spend,
    StateVersion,
    Summary,
    Usage,
    UsageCost,
)

if TYPE_CHECKING:
    from slop_tui.context import ContextSettings, TruncationSettings
    from slop_tui.context.budget import CompactionSettings, ModelInfo
    from slop_tui.context.layout import Stability
    from slop_tui.context.plan import ContextPlan
    from slop_tui.context.prompt import Prompt, PromptImage, ToolSpec
    from slop_tui.mcpclient.manager import McpManager
    from slop_tui.repomap import RepoMap
    from slop_tui.tools.sandbox import Sandbox

# What the panes show, between turns, where the next prompt's text will be.
NEXT_PROMPT = "‹your next prompt›"
KEY_SESSION = "current_session"
KEY_SKILLS = "active_skills"
KEY_THROTTLE = "throttle"
KEY_TOKEN_FACTOR = "token_factor"
# `elided:<session>`: ids of the tool results the guard ladder elided from the session's
# requests (JSON); they stay elided in later requests until `/context unelide`.
KEY_ELIDED = "elided"
# `personality` (global), `personality:<session>`, `personality:<session>:<lane>`.
KEY_PERSONALITY = "personality"


def personality_keys(session: str, lane: str) -> list[tuple[str, str]]:
    """(app_state key, source) of each personality level, the strongest first."""
    return [
        (f"{KEY_PERSONALITY}:{session}:{lane}", f"lane {lane}"),
        (f"{KEY_PERSONALITY}:{session}", "session"),
        (KEY_PERSONALITY, "global setting"),
    ]


# o200k counts of the texts of the last exactly shown request, by digest (JSON);
# named after the rank file, so other ranks never reuse them.
KEY_TOKEN_COUNTS = f"token_counts:o200k:{O200K_SHA256[:16]}"

Editor = Callable[[str, str], "str | None"]


@dataclass
class ProviderChoice:
    """Which provider and model the next request goes to."""

    name: str
    model: str
    strategy: str


# App-state keys of `/repo map` and `/repo tree`: "off", or a token budget.
KEY_REPO_MAP = "repo_map"
KEY_FILE_TREE = "file_tree"
# `dropped_layers:<session>`: the layers `/context drop LAYER` took out of the session's
# requests (JSON), until `/context restore LAYER`.
KEY_DROPPED_LAYERS = "dropped_layers"
IMAGES_LAYER = "images"  # the images of the history's prompts (they ride in its messages)
DROPPABLE_LAYERS = ("repo_map", "file_tree", "urls", IMAGES_LAYER)


def dropped_note(layer: str) -> str:
    """The plan's note for a layer `/context drop LAYER` took out (the preview reads it)."""
    return f"layer {layer} dropped; /context restore {layer} brings it back"


MENTION_ROWS = 12  # the newest window rows whose names and paths steer the map's ranking
REFRESH_INTERVAL = 3.0  # seconds between two looks at the files for the map
MAX_SOURCE_NOTES = 5


@dataclass
class Workspace:
    ledger: Ledger
    config: Config
    session: str
    active_skills: list[str] = field(default_factory=list)
    throttle: float = 0.0
    editor: Editor | None = None
    # Set by the orchestrator: asks the model for a fresh STATE (None: no model).
    rebuild_state: Callable[[], Awaitable[str | None]] | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    # Counts tokens for the session's model: exact o200k for OpenAI-family
    # models, otherwise an estimate times a factor learned from provider usage.
    counter: TokenCounter = field(default_factory=TokenCounter)
    # The handoff to inject as `## Resuming` in every request of the first turn
    # after a resume (set by `open` and `switch_session`; cleared by the orchestrator).
    pending_handoff: Handoff | None = None
    # One-line problems with config values that fell back to defaults (shown once).
    warnings: list[str] = field(default_factory=list)
    _warned: set[str] = field(default_factory=set, repr=False)
    # The counts stored under KEY_TOKEN_COUNTS (to write only when they change).
    _stored_counts: dict[str, int] = field(default_factory=dict, repr=False)
    # `open(count_tokens=...)` was given: every count goes through it, shown ones too.
    _own_count: bool = field(default=False, repr=False)
    _sandbox: Sandbox | None = field(default=None, repr=False)
    # Whether the sandbox can run, known before it is built (`use_sandbox_verdict`).
    _sandbox_verdict: bool | None = field(default=None, repr=False)
    # The MCP servers of `[mcp.servers]`, built on first use (`mcp`).
    _mcp: McpManager | None = field(default=None, repr=False)
    # `open` was given a session other than the stored one and has not stored it yet.
    _session_unsaved: bool = field(default=False, repr=False)
    # Each session's stability tracker (`note_sent`; the `cache` layout's promotions).
    stability: dict[str, Stability] = field(default_factory=dict, repr=False)
    # Each session's spend as last read (`current`, `record_call`): the header's cost.
    spend_shown: dict[str, Spend] = field(default_factory=dict, repr=False)
    # A reloaded config may carry new `[prices]`: calls without a price get one (`current`).
    _reprice_due: bool = field(default=False, repr=False)
    _repo_map: RepoMap | None = field(default=None, repr=False)
    # Whether the map takes change notifications (a long-lived process, the app); a
    # process that makes one request (`slop-tui ask`, `exec`) just looks at the files.
    watch_files: bool = True
    _keeper_started: bool = field(default=False, repr=False)  # `keep_watching` ran
    _keeper_hold: int | None = field(default=None, repr=False)  # `watcher_client.hold`
    # Image bytes as last sent, by (sha256, provider family): read and downscaled once.
    _image_cache: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict, repr=False)

    # -- lifecycle ---------------------------------------------------------

    @classmethod
    async def open(
        cls,
        config: Config,
        session: str | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        env: dict[str, str] | None = None,
        defer_writes: bool = False,
    ) -> Workspace:
        """Open the ledger and settle the session. A `session` other than the stored one
        becomes the stored one; with `defer_writes` (the app's first screen, which
        shows before it writes and before the tools' modules are imported) the caller
        registers the tools later with `register_tools`, stores the session with
        `save_session` and checks the settings the context engine reads with
        `check_settings` (its modules are not imported before the first frame)."""
        ledger = await Ledger.open(config.db_path, count_tokens=count_tokens)
        try:
            ws = cls(ledger=ledger, config=config, session=DEFAULT_SESSION)
            window = config.context.get("window")
            if isinstance(window, int) and window >= 0:
                ledger.default_window = window
            if count_tokens is None:
                # Messages are counted once, when written, with the current model's counter.
                ledger.count_tokens = lambda text: ws.counter.count(text)
            else:
                ws._own_count = True
            if env is not None:
                ws.env = env
            stored = await ledger.get_setting(KEY_SESSION)
            ws.session = check_session_name(session) if session else (stored or DEFAULT_SESSION)
            ws.active_skills = _json_list(await ledger.get_setting(KEY_SKILLS))
            await ws._load_token_counts()
            ws.throttle = float(await ledger.get_setting(KEY_THROTTLE, "0") or 0)
            ws._session_unsaved = bool(session) and session != stored
            if not defer_writes:
                await ws.register_tools()
                await ws.save_session()
            ws.pending_handoff = await ledger.latest_handoff(ws.session, unconsumed_only=True)
            await ws._check_unknown_memos()
            if not defer_writes:
                ws.check_settings()
            ws._default_provider(ws.provider_configs())
            await ws.reprice_unknown()
        except BaseException:
            await ledger.close()
            raise
        return ws

    async def close(self) -> None:
        """Close the ledger; first store a session `open` left unsaved and record an
        `exit` handoff when a turn ran in this process."""
        try:
            if self._mcp is not None:
                await self._mcp.aclose()
            if self._session_unsaved:
                with contextlib.suppress(LedgerError):
                    await self.save_session()
        finally:
            if self._repo_map is not None:
                self._repo_map.close()
            if self._keeper_hold is not None:
                os.close(self._keeper_hold)
                self._keeper_hold = None
            await self.ledger.close()

    async def write_handoff(self, reason: str, session: str | None = None) -> Handoff | None:
        """Record a handoff for `session` (default: the current one); None for an empty
        session. Git or ledger trouble becomes a warning, never an exception."""
        session = session or self.session
        from slop_tui.continuity.handoff import record_handoff

        try:
            return await record_handoff(
                self.ledger, session, reason, self.config.project_root, skip_empty=True
            )
        except (LedgerError, OSError, ValueError) as exc:
            self._warn(f"could not record the {reason} handoff for '{session}': {exc}")
            return None

    async def _check_unknown_memos(self) -> None:
        """Memos saved before slop-tui recorded who wrote them get the check a memo the
        model saves gets: an instruction-shaped one is quarantined (once, with a warning)."""
        for memo_id, phrase in await self.ledger.quarantine_unknown_memos(instruction_shaped):
            self._warn(
                f"memo {memo_id} was saved before slop-tui recorded who writes memos, and it "
                f"reads like an instruction ({phrase!r}): it is quarantined, never sent to the "
                f"model, until you confirm it (/memo show {memo_id}, /memo confirm {memo_id})."
            )

    async def _load_token_counts(self) -> None:
        raw = await self.ledger.get_setting(KEY_TOKEN_COUNTS)
        try:
            stored = json.loads(raw) if raw else {}
        except ValueError:
            stored = {}
        if isinstance(stored, dict) and count_cache().update(stored) == len(stored):
            self._stored_counts = stored

    async def save_session(self) -> None:
        """Store the session `open` was given as the one the next start opens."""
        if self._session_unsaved:
            self._session_unsaved = False
            await self.ledger.set_setting(KEY_SESSION, self.session)

    @property
    def mcp(self) -> McpManager | None:
        """The MCP servers (None when none is configured). Built on first use (the first
        turn, `/mcp`), never while the app opens: nothing of it runs or is imported
        before the first frame, and no server starts before a turn needs its tools."""
        if self._mcp is None and self.config.mcp:
            self._build_mcp()
        return self._mcp

    def preload_mcp(self) -> bool:
        """Start importing the MCP SDK in a background thread when an enabled server is
        configured (the app calls this once its first screen is up), so the first turn
        that needs a server does not wait seconds for the import. Starts no server."""
        mcp = self.mcp
        if mcp is None or not any(s.settings.enabled for s in mcp.servers.values()):
            return False
        from slop_tui.mcpclient import preload_sdk

        preload_sdk()
        return True

    async def preload_provider(self) -> bool:
        """Start importing the SDK of the provider the next request goes to, in a
        background thread (the app calls this a little after its first screen), so the
        first reply does not wait for it (slop_tui/providers/sdk.py). False when that
        provider has none (the demo)."""
        from slop_tui.providers.sdk import preload_sdk

        choice = await self.provider_choice()
        return preload_sdk(self.provider_configs()[choice.name].kind) is not None

    @property
    def mcp_if_built(self) -> McpManager | None:
        """The MCP servers if something used them already (the header asks, not builds)."""
        return self._mcp

    def _build_mcp(self) -> None:
        from slop_tui.mcpclient import build_manager

        self._mcp, warnings = build_manager(
            self.config.mcp,
            ledger=self.ledger,
            project_root=self.config.project_root,
            env=self.env,
            sandbox=lambda: self.sandbox,
        )
        for warning in warnings:
            self._warn(warning)

    async def register_tools(self) -> None:
        """Store the tools' declarations (written only when their rows changed)."""
        from slop_tui.tools import registry_rows

        await self.ledger.register_tools(registry_rows())

    # -- session and workspace state -------------------------------------

    async def snapshot(
        self,
        changed: Changed,
        *,
        rows_prompt_chars: int = 240,
        prompts_for_newest: int | None = None,
        rows_read: Awaitable[list[tuple]] | None = None,
        spend: bool = True,
    ) -> Snapshot:
        """One read of what the panes show after `changed`: the plan of the next request
        always (with the provider, the session and the token figures), the group
        list's rows, the sessions and STATE only when the change touches them.
        `rows_read`: the group list's rows, read already (`Ledger.group_rows` of this
        session, started earlier by the caller). `spend` False: the session's spend is
        not read again (`current`), the caller has just read it."""
        choice = await self.provider_choice()
        sess = await (self.current() if spend else self._settings())
        sessions = state = failed = rows = None
        if rows_read is not None:
            rows = await rows_read
        elif changed & _READS_ROWS:
            rows = await self.ledger.group_rows(
                self.session, rows_prompt_chars, prompts_for_newest=prompts_for_newest
            )
        if rows is not None:
            # Only a group with an error row can hold a failed prompt: no query otherwise.
            errors = any(row[5] == STATUS_ERROR for row in rows)
            failed = await self.ledger.failed_prompts(self.session) if errors else []
        plan, estimated = await self.display_plan(choice.strategy)
        last = await self.ledger.last_usage(self.session)
        calls, prompt_tokens, completion_tokens = await self.ledger.background_usage(self.session)
        if changed & _READS_SESSIONS:
            sessions = await self.ledger.list_sessions()
        if changed & _READS_STATE:
            state = await self.ledger.current_state(self.session)
        return Snapshot(
            changed=changed,
            choice=choice,
            session=sess,
            plan=plan,
            estimated=estimated,
            context_window=self.model_info(choice.model).context_window,
            prompt_series=await self.ledger.prompt_token_series(self.session),
            cached_tokens=last.cached_tokens if last is not None else None,
            background=(calls, prompt_tokens + completion_tokens),
            rows=rows,
            sessions=sessions,
            state=state,
            failed_prompts=failed,
        )

    def history(self, session: str | None = None) -> HistoryReader:
        """A read-only view of a session's history for the panes (default: the current)."""
        root = Path(self.config.project_root).resolve()
        return HistoryReader(self.ledger, session or self.session, root)

    def reconfigure(self, config: Config) -> None:
        """Take a reloaded configuration (a project folder just trusted): the sandbox is
        probed again, as `[tools] sandbox` or `shell_network` may have changed, and the
        MCP servers follow the new `[mcp.servers]` (the project's join)."""
        self.config = config
        self._sandbox = None
        self._sandbox_verdict = None
        self._reprice_due = True
        if self._mcp is not None:
            from slop_tui.mcpclient import parse_servers

            servers, warnings = parse_servers(config.mcp, "config.toml")
            self._mcp.update(servers)
            for warning in warnings:
                self._warn(warning)

    def take_new_trust(self) -> bool:
        """Whether the project file, untrusted when the configuration was read, has been
        trusted since (`slop-tui trust` in another terminal); if so the configuration is
        read again and taken (`reconfigure`). Cheap: one small file read and a hash."""
        config = self.config
        if not config.untrusted:
            return False
        from slop_tui.trust import TRUSTED, trust_state

        where = config.user_config_dir or Path.home()
        if trust_state(config.project_root, where).status != TRUSTED:
            return False
        from slop_tui.config import load_config

        self.reconfigure(load_config(db=str(config.db_path), env=self.env, cwd=config.project_root))
        return True

    async def current(self) -> Session:
        """The session's settings; the session's spend (`cost_label`) is read with them."""
        if self._reprice_due:
            await self.reprice_unknown()
        self.spend_shown[self.session] = await self.ledger.spend(self.session)
        return await self._settings()

    async def _settings(self) -> Session:
        """The session's settings without its spend: what the provider choice and the
        plan read. The spend is a sum over every call of the session (~5 ms of CPU at
        10,000 calls); `current` reads it once for the header's cost."""
        return await self.ledger.session_or_default(self.session)

    def for_session(self, name: str) -> Workspace:
        """The same workspace (ledger, config, settings) acting on session `name`, for a
        command that targets a session other than the current one."""
        _ = self.mcp  # one set of MCP servers, shared with the copy
        return replace(self, session=check_session_name(name), pending_handoff=None)

    async def switch_session(self, name: str) -> None:
        """Make `name` current: a handoff for the session left, the new one's pending resume."""
        name = check_session_name(name)
        old = self.session
        running = await self.ledger.running_here() if name != old else None
        if running is not None:
            # The turn writes to the session it started in: this process stays there.
            raise LedgerError(
                f"group {running[1]}'s turn is still running in '{running[0]}'; wait for "
                "it or cancel it (Esc) before switching sessions."
            )
        if name != old:
            await self.write_handoff("session_switch", old)
        self.session = name
        await self.ledger.set_setting(KEY_SESSION, self.session)
        if name != old:
            self.pending_handoff = await self.ledger.latest_handoff(name, unconsumed_only=True)

    def pending_resume(self) -> Handoff | None:
        """The handoff the next request of this session resumes from (None: none)."""
        stored = self.pending_handoff
        return stored if stored is not None and stored.session == self.session else None

    def resume_consumed(self, handoff: Handoff) -> None:
        """A turn injected `handoff` and its answer consumed it: later turns go without."""
        if self.pending_handoff is handoff:
            self.pending_handoff = None

    async def reload_pending_handoff(self) -> None:
        """After an edit took rows away. The resume layer is rebuilt from the current
        ledger each time it is used (`_resume_text`), so an undone group's goal never
        comes back through it, and it stays while the session has a history; once
        the stored handoff went to the trash with a cleared history, nothing is resumed."""
        pending = self.pending_handoff
        if pending is None or await self.ledger.get_handoff(pending.id) is not None:
            return
        if await self.ledger.last_group_id(self.session) is None:
            self.pending_handoff = None

    async def set_active_skills(self, names: list[str]) -> None:
        self.active_skills = list(dict.fromkeys(names))
        await self.ledger.set_setting(KEY_SKILLS, json.dumps(self.active_skills))

    async def reload_active_skills(self) -> list[str]:
        """Tools may change the active set (use_skill); re-read it from the ledger."""
        self.active_skills = _json_list(await self.ledger.get_setting(KEY_SKILLS))
        return self.active_skills

    async def learn_tokens(self, estimated: int, reported: int) -> None:
        """Correct the estimate for non-OpenAI models from provider-reported prompt tokens."""
        if self.counter.is_exact or reported <= 0 or estimated <= 0:
            return
        base = round(estimated / self.counter.factor)
        factor = self.counter.learn(base, reported)
        await self.ledger.set_setting(f"{KEY_TOKEN_FACTOR}:{self.counter.model}", repr(factor))

    async def set_throttle(self, seconds: float) -> None:
        if seconds < 0:
            raise LedgerError("the throttle must be 0 seconds or more.")
        self.throttle = seconds
        await self.ledger.set_setting(KEY_THROTTLE, repr(seconds))

    async def skills(self) -> list[Skill]:
        active = []
        for name in self.active_skills:
            skill = await self.ledger.get_skill(name)
            if skill is not None:
                active.append(skill)
        return active

    # -- settings that may fall back to defaults ---------------------------

    def _warn(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self.warnings.append(text)

    def pop_warnings(self) -> list[str]:
        """Warnings not shown yet (each one is returned once)."""
        out, self.warnings = self.warnings, []
        return out

    def check_settings(self) -> None:
        """Surface problems of `[compaction]`, `[truncation]` and `[context]` early, as
        warnings (`pop_warnings`), before a request needs them."""
        self.compaction_settings()
        self.context_settings()

    def compaction_settings(self) -> CompactionSettings:
        """`[compaction]`; a bad table gives a warning and the defaults."""
        from slop_tui.context.budget import CompactionSettings

        try:
            return CompactionSettings.from_mapping(dict(self.config.compaction))
        except (TypeError, ValueError) as exc:
            self._warn(f"[compaction] {exc}; using the default compaction settings.")
            return CompactionSettings()

    def model_info(self, model: str) -> ModelInfo:
        """The model's limits with `[models]` overrides; a bad override gives a warning."""
        from slop_tui.context.budget import model_info as lookup_model_info

        try:
            return lookup_model_info(model, self.config.models)
        except (TypeError, ValueError) as exc:
            self._warn(f"[models] {exc}; using the built-in limits.")
            return lookup_model_info(model)

    def context_settings(self) -> ContextSettings:
        """`[truncation]` and `[context] layout`; an unknown layout gives a warning. The
        layers the stability tracker found stable go with them (`cache` layout)."""
        from slop_tui.context import ContextSettings

        layout = self.config.context.get("layout", "default")
        tracker = self.stability.get(self.session)
        stable = tracker.stable() if tracker is not None else frozenset()
        try:
            return ContextSettings(truncation=self.truncation(), layout=layout, stable=stable)
        except (TypeError, ValueError) as exc:
            self._warn(f"[context] {exc}; using the default layout.")
            return ContextSettings(truncation=self.truncation())

    # -- cost and the spending guard ------------------------------------------

    def price_overrides(self) -> dict[str, Rates]:
        """The valid `[prices]` overrides (config loading reported the others)."""
        return parse_overrides(self.config.prices)[0]

    def budget_limits(self) -> tuple[float | None, float | None]:
        """`[budget]` (session_cost_limit, daily_cost_limit) in USD; None: no limit."""
        limits = [self.config.budget.get(k) for k in ("session_cost_limit", "daily_cost_limit")]
        return tuple(None if v is None else float(v) for v in limits)  # type: ignore[return-value]

    async def record_call(
        self,
        provider,
        model: str,
        reply,
        group_id: int | None,
        *,
        purpose: str = PURPOSE_TURN,
    ) -> Usage:
        """Store one provider call's usage with its cost (None: price unknown, or the
        provider reported no usage), and the context cache written for it, if any."""
        cost = None
        if reply.usage_reported:
            cost = await self._price(
                provider,
                model,
                reply.prompt_tokens,
                reply.cached_tokens,
                reply.completion_tokens,
                reply.reasoning_tokens,
            )
        usage = await self.ledger.record_usage(
            self.session,
            group_id,
            provider.name,
            model,
            reply.prompt_tokens,
            reply.completion_tokens,
            reply.cached_tokens,
            purpose=purpose,
            reasoning_tokens=reply.reasoning_tokens,
            reported=reply.usage_reported,
            cost=cost,
        )
        if reply.cache_write_tokens:
            await self._record_cache_write(provider, model, reply.cache_write_tokens, group_id)
        self.spend_shown[self.session] = await self.ledger.spend(self.session)
        return usage

    async def _price(
        self, provider, model: str, prompt: int, cached: int, completion: int, reasoning: int
    ) -> UsageCost | None:
        """A call's cost (None: price unknown). The first price lookup loads the price
        table (about a second), in a thread."""
        import asyncio

        cfg = getattr(provider, "config", None)
        return await asyncio.to_thread(
            price_call,
            model=model,
            kind=getattr(cfg, "kind", "openai"),
            base_url=getattr(cfg, "base_url", None),
            prompt_tokens=prompt,
            cached_tokens=cached,
            completion_tokens=completion,
            reasoning_tokens=reasoning,
            overrides=self.price_overrides(),
        )

    async def _record_cache_write(self, provider, model: str, tokens: int, group_id) -> None:
        """An explicit context cache made for a call: its tokens are billed once at the
        input rate, a background call of purpose `cache` (its storage is not priced: the
        price table has no rate for it)."""
        cost = await self._price(provider, model, tokens, 0, 0, 0)
        await self.ledger.record_usage(
            self.session,
            group_id,
            provider.name,
            model,
            tokens,
            0,
            purpose=PURPOSE_CACHE,
            cost=cost,
        )

    async def reprice_unknown(self) -> int:
        """Calls recorded as "price unknown" for a model `[prices]` now prices get that
        price (one notice says how many); a call that had a price keeps it."""
        self._reprice_due = False
        overrides = self.price_overrides()
        if not overrides:
            return 0

        def price(model: str, prompt: int, cached: int, completion: int, reasoning: int):
            return price_call(
                model=model,
                kind="openai",
                base_url=None,
                prompt_tokens=prompt,
                cached_tokens=cached,
                completion_tokens=completion,
                reasoning_tokens=reasoning,
                overrides=overrides,
            )

        priced = await self.ledger.reprice_unknown(sorted(overrides), price)
        count = sum(priced.values())
        if count:
            self._warn(
                f"[prices] priced {count} earlier call{'s' * (count != 1)} that had no price "
                f"({', '.join(sorted(priced))})."
            )
        return count

    async def budget_check(self) -> BudgetCheck:
        """The session's and today's spend against `[budget]`."""
        session_limit, daily_limit = self.budget_limits()
        if session_limit is None and daily_limit is None:
            return BudgetCheck(BUDGET_OK)
        session = await self.ledger.spend(self.session)
        self.spend_shown[self.session] = session
        day = await self.ledger.spend_since(_local_midnight())
        return check_budget(session, day, session_limit, daily_limit)

    def note_sent(self, prompt: Prompt) -> None:
        """The stability tracker after a request of the session was sent (it lives in
        memory and starts empty in each process)."""
        from slop_tui.context.layout import Stability, sent_layers

        tracker = self.stability.get(self.session, Stability())
        self.stability[self.session] = tracker.update(sent_layers(prompt))

    def cost_label(self) -> str:
        """The session's cost for the header ("" before any call)."""
        spend = self.spend_shown.get(self.session)
        return "" if spend is None or not spend.calls else spend_text(spend)

    # -- the shell's sandbox -------------------------------------------------

    @property
    def sandbox(self) -> Sandbox:
        """The OS sandbox shell commands run in (built once per workspace on first use,
        or ahead in a thread: `prepare_sandbox`, which the app calls once its first
        screen is up)."""
        if self._sandbox is None:
            self._sandbox = detect_sandbox(self.config, self.env)
        return self._sandbox

    async def prepare_sandbox(self) -> None:
        """Build the sandbox in a thread (its modules, the paths it hides), so the first
        shell command does not wait for it. It is kept only if the configuration is
        still the one it was built for: a `reconfigure` meanwhile (a folder just
        trusted) makes the sandbox be built again for the new one."""
        if self._sandbox is not None:
            return
        import asyncio

        config = self.config
        sandbox = await asyncio.to_thread(detect_sandbox, config, self.env)
        if self.config is config and self._sandbox is None:
            self._sandbox = sandbox

    def use_sandbox_verdict(self, available: bool) -> None:
        """`sandbox_can_run`'s answer for this workspace's config and environment,
        probed while the ledger opened: `sandboxed` says it until the sandbox is built."""
        self._sandbox_verdict = available

    @property
    def sandboxed(self) -> bool:
        """Whether shell commands run in the OS sandbox (what the header says): the
        sandbox's own answer once built, before that the probe's verdict, which the
        sandbox is built on."""
        if self._sandbox is None and self._sandbox_verdict is not None:
            return self._sandbox_verdict
        return self.sandbox.available

    def secret_env_names(self) -> frozenset[str]:
        """Variables named by a provider's `api_key_env`: the shell never gets them."""
        names = set()
        for entry in self.config.providers.values():
            if isinstance(entry, dict) and isinstance(entry.get("api_key_env"), str):
                names.add(entry["api_key_env"])
        return frozenset(names)

    # -- providers ---------------------------------------------------------

    def provider_configs(self) -> dict:
        from slop_tui.providers.config import load_provider_configs

        configs, errors = load_provider_configs(self.env, self.config.providers)
        for error in errors:  # a broken [providers.NAME] table is left out, not silently
            self._warn(error)
        return configs

    def _default_provider(self, configs: dict) -> str:
        """`default_provider` from config.toml when it is configured, else the automatic
        choice; a name that is not configured is a warning, never silently ignored."""
        from slop_tui.providers.config import default_provider_name

        wanted = self.config.default_provider
        if wanted in configs:
            return wanted
        name = default_provider_name(configs, self.env)
        if wanted is not None:
            self._warn(
                f"default_provider = {wanted!r} is not a configured provider (configured: "
                f"{', '.join(configs)}); using {name!r}."
            )
        return name

    async def provider_choice(self) -> ProviderChoice:
        from slop_tui.providers.config import strategy_of

        configs = self.provider_configs()
        sess = await self._settings()
        name = sess.provider if sess.provider in configs else None
        if name is None:
            name = self._default_provider(configs)
        cfg = configs[name]
        model = sess.model if (sess.provider == name and sess.model) else cfg.model
        if self.counter.model != model:
            stored = await self.ledger.get_setting(KEY_TOKEN_FACTOR + ":" + model)
            self.counter = TokenCounter(model, factor=float(stored) if stored else 1.0)
        return ProviderChoice(name=name, model=model, strategy=strategy_of(cfg.kind))

    # -- the request -------------------------------------------------------

    def truncation(self) -> TruncationSettings:
        from slop_tui.context import TruncationSettings

        return TruncationSettings.from_mapping(dict(self.config.truncation))

    async def enabled_tools(self) -> list[ToolSpec]:
        from slop_tui.tools import tool_specs

        enabled = {t.name for t in await self.ledger.list_tools() if t.enabled}
        specs = list(tool_specs())
        if self._mcp is not None:  # the tools of running MCP servers, after the built-ins
            specs += self._mcp.tool_specs()
        return [spec for spec in specs if spec.name in enabled]

    async def display_plan(
        self,
        strategy: str | None = None,
        *,
        edit: Edit | None = None,
        next_prompt: str | None = NEXT_PROMPT,
    ) -> tuple[ContextPlan, bool]:
        """The plan of the next request for the panes (marks, gauge, preview, labels), and
        whether its counts are estimates. Never builds the tokenizer (see the module
        docstring): texts it has not counted before are estimated until it is built.
        `edit`: the plan as it would be after that edit (a projection). Between turns
        the request is the one `next_prompt` would make (`plan`); while this process
        runs a turn of the session, the turn's own next request."""
        if next_prompt is not None and await self._turn_running_here():
            next_prompt = None
        if self._own_count:
            return await self.plan(strategy, edit=edit, next_prompt=next_prompt), False
        count = DisplayCount(self.counter)
        plan = await self.plan(strategy, count_tokens=count, edit=edit, next_prompt=next_prompt)
        if edit is None and not count.estimated and count.used != self._stored_counts:
            self._stored_counts = count.used
            await self.ledger.set_setting(KEY_TOKEN_COUNTS, json.dumps(count.used))
        return plan, bool(count.estimated)

    async def next_request(self, strategy: str | None = None) -> Prompt:
        """The request the next prompt makes, `NEXT_PROMPT` in its text's place (while
        this process runs a turn of the session: that turn's next request), counted
        exactly: what `/context show` prints and the preview shows."""
        running = await self._turn_running_here()
        plan = await self.plan(strategy, next_prompt=None if running else NEXT_PROMPT)
        return plan.request

    async def _turn_running_here(self) -> bool:
        running = await self.ledger.running_here()
        return running is not None and running[0] == self.session

    async def prompt(
        self,
        strategy: str | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        upto: int | None = None,
    ) -> Prompt:
        """The next request exactly as it is sent: `plan(...).request`."""
        return (await self.plan(strategy, count_tokens=count_tokens, upto=upto)).request

    async def plan(
        self,
        strategy: str | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        upto: int | None = None,
        elided: frozenset[int] = frozenset(),
        summarized: bool = False,
        before_summary: int | None = None,
        edit: Edit | None = None,
        next_prompt: str | None = None,
    ) -> ContextPlan:
        """Read the ledger and build the context plan of the next request (what is shown
        is what is sent: the orchestrator sends `plan.request`).

        `count_tokens` counts the texts that carry no stored count (default: the
        ledger's counter, exact, building the tokenizer if needed). `upto`: the
        running turn's group; groups another process opened after it are later
        turns, not this request's history, so it stays the current request.
        `elided`: tool results elided earlier in this turn (they stay elided).
        `summarized` / `before_summary`: a guard summary was made for this request.
        `edit`: read the ledger as it would be after that edit (a projection).
        `next_prompt`: plan the request a prompt of this text would make, between turns:
        its group is one of the window's N, as it will be once it is stored, and the
        images waiting for the next prompt go with it. Only what the prompt's words
        select (memos, named lanes, the map's ranking) can differ when it is sent.
        """
        from slop_tui.context import AssemblyInputs
        from slop_tui.context.assemble import focus_note
        from slop_tui.context.plan import (
            PlanInputs,
            PlanSettings,
            build_plan,
            head_summary,
            named_lanes,
            pending_cap,
        )

        choice = await self.provider_choice()
        strategy = strategy or choice.strategy
        elided = elided | await self.elided_results()
        hide, show = (edit.hide, edit.show) if edit is not None else ((), ())
        sess = await self._settings()
        window = await self._window_upto(sess, upto, hide, show, room=next_prompt is not None)
        pending: list[ImageRef] = []
        if next_prompt is not None:
            window.append(await self._next_prompt_row(sess, choice.strategy, next_prompt))
            pending = await self.ledger.pending_images(self.session)
        comp = self.compaction_settings()
        summaries: list[Summary] = []
        backlog: list[Message] = []
        complete = True
        stale = None
        if comp.enabled:
            stored = await self.ledger.summaries(self.session, sess.lane)
            summaries = [x for x in stored if edit is None or not edit.invalidates(x)]
            stale = await self.ledger.stale_top(self.session, sess.lane)
            gone = [x.last_message_id for x in stored if x not in summaries]
            stale = max([*gone, *([stale] if stale is not None else [])], default=None)
            start = min((m.group_id for m in window if m.group_id is not None), default=None)
            head = head_summary(summaries, start, sess.lane)
            if start is not None:
                backlog = await self.ledger.lane_backlog(
                    self.session,
                    sess.lane,
                    start,
                    head.last_message_id if head is not None else 0,
                    pending_cap(comp) + 1,
                    newest=True,
                    hide=hide,
                    show=show,
                )
                backlog, complete = _whole_groups(backlog, pending_cap(comp))
        state = await self.ledger.current_state(self.session)
        # A placeholder selects nothing by its words: the sent prompt's own words do.
        latest = latest_user_text(window) if next_prompt is None else ""
        keywords = extract_keywords(latest)
        named: list[tuple[str, Summary]] = []
        if comp.enabled and (
            "lane" in latest or "topic" in latest or "thread" in latest or ":" in latest
        ):
            lanes = await self.ledger.summarized_lanes(self.session)
            for lane in named_lanes(latest, lanes, sess.lane):
                stored = await self.ledger.summaries(self.session, lane)
                if stored:
                    named.append((lane, max(stored, key=lambda x: (x.last_message_id, x.id))))
        overview = None
        if comp.enabled and comp.session_summary:
            made = await self.ledger.session_summaries(self.session)
            made = [x for x in made if edit is None or not edit.invalidates(x)]
            overview = made[-1] if made else None
        personality, source = await self.personality(sess)
        candidates, bm25 = await self.ledger.memo_candidates(keywords)
        memos = rank_memos(keywords, candidates, bm25)
        files, notes = await self.context_files()
        model = self.model_info(choice.model)
        dropped = await self.dropped_layers()
        repo_map, file_tree, source_notes = await self.repo_sources(
            window, [p for p, _ in files], model.max_input_tokens, count_tokens, skip=dropped
        )
        notes.extend(source_notes)
        notes.extend(dropped_note(name) for name in DROPPABLE_LAYERS if name in dropped)
        reply_to = lane_group(sess.lane)
        if reply_to is None:
            reply_to = _replied_group(window)
        quoted = await self._final_answer(reply_to) if reply_to is not None else ""
        resume = self._resume_text(state.content if state else None, sess)
        inputs = AssemblyInputs(
            session=sess,
            messages=window,
            strategy=strategy,
            state=state.content if state else None,
            state_group=state.group_id if state else None,
            scratchpad=sess.scratchpad,
            memos=memos,
            skills=await self.skills(),
            tools=await self.enabled_tools(),
            files=files,
            resume=resume,
            quoted=quoted,
            quoted_group=reply_to,
            focus=focus_note(reply_to, _last_answer_group(window)),
            personality=personality,
            personality_source=source,
            named_lanes=tuple(named),
            session_summary=overview,
            repo_map=repo_map,
            file_tree=file_tree,
            urls=[]
            if "urls" in dropped
            else [(p.url, p.title, p.content) for p in await self.ledger.url_pages(self.session)],
            resources=[
                (r.server, r.uri, r.name, r.content)
                for r in await self.ledger.mcp_resources(self.session)
            ],
            images={}
            if IMAGES_LAYER in dropped
            else await self.prompt_images(window, strategy, choice.model, notes, pending),
        )
        settings = PlanSettings(
            context=self.context_settings(),
            compaction=comp,
            model=model,
        )
        plan = build_plan(
            PlanInputs(
                assembly=inputs,
                backlog=backlog,
                backlog_complete=complete,
                summaries=summaries,
                elided=elided,
                now=time.time(),
                summarized=summarized,
                before_summary=before_summary,
                stale_top=stale,
            ),
            settings,
            count_tokens or self.ledger.count_tokens,
        )
        if notes:
            request = replace(plan.request, notes=(*plan.request.notes, *notes))
            plan = replace(plan, request=request)
        return plan

    async def personality(self, sess: Session | None = None) -> tuple[str, str]:
        """The effective personality and its source, by seed 002's precedence: the
        lane's, else the session's, else the global one (`/personality set`)."""
        sess = sess or await self._settings()
        for key, source in personality_keys(self.session, sess.lane):
            text = (await self.ledger.get_setting(key) or "").strip()
            if text:
                return text, source
        return "", ""

    async def dropped_layers(self) -> frozenset[str]:
        """The layers `/context drop LAYER` took out of this session's requests."""
        raw = await self.ledger.get_setting(f"{KEY_DROPPED_LAYERS}:{self.session}")
        return frozenset(v for v in _json_list(raw) if v in DROPPABLE_LAYERS)

    async def drop_layer(self, layer: str, dropped: bool) -> bool:
        """Take `layer` out of this session's requests (or put it back); False when it
        already was."""
        now = await self.dropped_layers()
        after = now | {layer} if dropped else now - {layer}
        if after == now:
            return False
        await self.ledger.set_setting(
            f"{KEY_DROPPED_LAYERS}:{self.session}", json.dumps(sorted(after))
        )
        return True

    async def elided_results(self) -> frozenset[int]:
        """The tool results elided from this session's requests: they stay elided (or
        deeper) in every later request, across turns, until `/context unelide`."""
        raw = await self.ledger.get_setting(f"{KEY_ELIDED}:{self.session}")
        return frozenset(int(v) for v in _json_list(raw) if v.isdigit())

    async def keep_elided(self, request: Prompt) -> None:
        """Remember the results `request` (about to be sent) carries elided; results that
        left the request are forgotten (they are not sent anyway)."""
        from slop_tui.context.guards import TIER_ELIDED

        ids = sorted(
            m.message_id
            for m in request.messages
            if m.tier == TIER_ELIDED and m.message_id is not None and not m.kind
        )
        if frozenset(ids) != await self.elided_results():
            await self.ledger.set_setting(f"{KEY_ELIDED}:{self.session}", json.dumps(ids))

    async def unelide(self, ids: Collection[int] | None = None) -> frozenset[int]:
        """Send these elided results (None: all of them) again from the next request on;
        returns the ids that were elided."""
        now = await self.elided_results()
        gone = now if ids is None else now & frozenset(ids)
        if gone:
            await self.ledger.set_setting(
                f"{KEY_ELIDED}:{self.session}", json.dumps(sorted(now - gone))
            )
        return gone

    def _resume_text(self, state: str | None, sess: Session) -> str:
        """The `## Resuming` layer: the pending handoff, rebuilt from the current ledger
        (an undone, dropped or removed group's goal never comes back through it)."""
        stored = self.pending_resume()
        if stored is None:
            return ""
        from slop_tui.continuity.handoff import current_handoff, resume_text

        return resume_text(current_handoff(stored, state, sess.scratchpad))

    async def _next_prompt_row(self, sess: Session, strategy: str, text: str) -> Message:
        """The row a prompt of `text` becomes when it is sent (`Ledger.open_turn`)."""
        mid = await self.ledger.next_message_id()
        return Message(
            id=mid,
            session=self.session,
            group_id=mid,
            lane=sess.lane,
            role="user",
            content=text,
            strategy=strategy,
            created_at=time.time(),
        )

    async def _window_upto(
        self,
        sess: Session,
        upto: int | None,
        hide: Collection[int] = (),
        show: Collection[int] = (),
        *,
        room: bool = False,
    ) -> list[Message]:
        """The window, without groups newer than `upto` (only another workspace on the
        same session can open one mid-turn); still `window_size` groups when there are.
        `room`: one group fewer, for the next prompt's group (none when N is 1)."""
        size = sess.window_size
        if room and size > 0:
            size -= 1
            if size == 0:
                return []
        while True:
            window = await self.ledger.window(
                self.session, size, lane=sess.lane, hide=hide, show=show
            )
            if upto is None or not window or window[-1].group_id <= upto:
                return window
            kept = [m for m in window if m.group_id <= upto]
            groups = len({m.group_id for m in window})
            older = len({m.group_id for m in kept})
            if size == 0 or groups < size or older >= sess.window_size:
                return kept  # full history, every group read, or enough older ones
            size = sess.window_size + groups - older

    # -- the repository's own layers: the map and the file tree -------------------------

    async def repo_settings(self, max_input_tokens: int | None) -> tuple[int, int]:
        """Token budgets of the repository map and the file tree (0: off): `/repo`'s
        stored choice, else `[context] repo_map_tokens` / `file_tree_tokens`, else a
        share of the input budget."""
        from slop_tui.repomap import default_budget, default_tree_budget

        out = []
        for key, default in (
            (KEY_REPO_MAP, default_budget(max_input_tokens)),
            (KEY_FILE_TREE, default_tree_budget(max_input_tokens)),
        ):
            configured = self.config.context.get(f"{key}_tokens")
            budget = configured if isinstance(configured, int) and configured >= 0 else default
            stored = await self.ledger.get_setting(key)
            if stored == "off":
                budget = 0
            elif stored and stored.isdigit():
                budget = int(stored)
            out.append(budget)
        return out[0], out[1]

    def repo_map(self) -> RepoMap:
        """The project's map, built on first use; cached under `.slop/` when that exists."""
        if self._repo_map is None:
            from slop_tui.repomap import RepoMap
            from slop_tui.repomap.watcher_client import idle_seconds

            root = Path(self.config.project_root).resolve()
            cache = root / ".slop"
            self._repo_map = RepoMap(
                root,
                cache if cache.is_dir() else None,
                watch=self.watch_files,
                keeper=idle_seconds(self.config.context) > 0,
            )
        return self._repo_map

    def keep_watching(self) -> None:
        """Start the project's watcher process (`repomap.watcher_process`), which keeps
        watching the files after this process exits, unless one runs or it is off
        (`[context] repo_watcher_idle = 0`). Only a process that watches (the app)
        starts one, once, after its map's first look; in a thread of its own."""
        if self._keeper_started or not self.watch_files:
            return
        self._keeper_started = True
        from slop_tui.repomap import watcher_client

        idle = watcher_client.idle_seconds(self.config.context)
        root = Path(self.config.project_root).resolve()
        if idle <= 0 or not (root / ".slop").is_dir():
            return
        # While this process runs, the watcher is not idle (closed with the workspace).
        self._keeper_hold = watcher_client.hold(root)
        if watcher_client.running_pid(root) is not None:
            return
        import threading

        log = root / ".slop" / "repomap-watcher.log"
        threading.Thread(target=watcher_client.start, args=(root, idle, log), daemon=True).start()

    async def repo_sources(
        self,
        window: Sequence[Message],
        chat_files: Collection[str],
        max_input_tokens: int | None,
        count_tokens: Callable[[str], int] | None = None,
        skip: Collection[str] = (),
    ) -> tuple[str, str, list[str]]:
        """(map text, file tree text, one note per file the map could not read); the
        layers named in `skip` are left empty."""
        map_budget, tree_budget = await self.repo_settings(max_input_tokens)
        if "repo_map" in skip:
            map_budget = 0
        if "file_tree" in skip:
            tree_budget = 0
        if map_budget <= 0 and tree_budget <= 0:
            return "", "", []
        import asyncio

        from slop_tui.repomap import tree_text
        from slop_tui.repomap.map import mentioned_text

        count = count_tokens or self.ledger.count_tokens
        if count_tokens is None and not self._own_count:
            # A request's map and tree are cut by the uncorrected count: the correction
            # learned from the provider's counts moves after every call, and a map or
            # tree cut at a new place each request would start a new prompt prefix each
            # time. (The panes' plan passes its own count, which never builds the
            # tokenizer.)
            count = self.counter.base_count
        recent = window[-MENTION_ROWS:]
        mentions = mentioned_text(m.content for m in recent if m.role in ("user", "assistant"))
        rm = self.repo_map()

        def build() -> tuple[str, str, list[str]]:
            with rm.lock:
                problems = rm.refresh(min_interval=REFRESH_INTERVAL)
                text = (
                    rm.render(map_budget, count, chat_files, mentions).text
                    if map_budget > 0
                    else ""
                )
                paths = list(rm.paths)
                self.keep_watching()  # after the first look (the lock: once)
            tree = tree_text(paths, tree_budget, count).text if tree_budget > 0 else ""
            notes = [f"repo map: {p}" for p in problems[:MAX_SOURCE_NOTES]]
            if len(problems) > MAX_SOURCE_NOTES:
                notes.append(f"repo map: {len(problems) - MAX_SOURCE_NOTES} more file(s) skipped")
            return text, tree, notes

        return await asyncio.to_thread(build)

    # -- images ---------------------------------------------------------------------

    def vision(self, model: str) -> bool:
        """Whether `model` reads images (`[models.NAME] vision`, else the known list)."""
        from slop_tui.images import supports_vision

        spec = self.config.models.get(model)
        return supports_vision(model, spec.get("vision") if isinstance(spec, dict) else None)

    async def prompt_images(
        self,
        window: Sequence[Message],
        strategy: str,
        model: str,
        notes: list[str],
        pending: Sequence[ImageRef] = (),
    ) -> dict[int, list[PromptImage]]:
        """The images of the window's prompts, as `strategy` gets them (downscaled to its
        limit, its token rule); none for a model without vision (with a note). An image
        whose file is gone or damaged is left out with a note. `pending`: the images
        waiting for the next prompt, the window's last row (`plan(next_prompt=...)`)."""
        from slop_tui.context.prompt import PromptImage

        ids = [m.id for m in window if m.role in ("user", "tool")]
        refs = await self.ledger.message_images(ids) if ids else {}
        if pending and window:
            refs = {**refs, window[-1].id: list(pending)}
        if not refs:
            return {}
        if not self.vision(model):
            n = sum(len(v) for v in refs.values())
            notes.append(f"images: {n} image(s) not sent: {model} reads no images")
            return {}
        from slop_tui.images import ImageError, family, image_path, image_payload, image_tokens

        root = Path(self.config.project_root).resolve()
        out: dict[int, list[PromptImage]] = {}
        for mid, images in refs.items():
            for ref in images:
                key = (ref.sha256, family(strategy))
                payload = self._image_cache.get(key)
                if payload is None:
                    try:
                        payload = image_payload(
                            image_path(root, ref.sha256, ref.mime), ref.mime, strategy
                        )
                    except (OSError, ValueError, ImageError) as exc:
                        notes.append(f"images: {ref.name} left out ({exc})")
                        continue
                    if len(self._image_cache) >= 32:
                        self._image_cache.pop(next(iter(self._image_cache)))
                    self._image_cache[key] = payload
                mime, data = payload
                tokens = image_tokens(ref.width, ref.height, strategy)
                out.setdefault(mid, []).append(
                    PromptImage(ref.name, mime, ref.width, ref.height, tokens, ref.sha256, data)
                )
        return out

    async def context_files(self) -> tuple[list[tuple[str, str]], list[str]]:
        """The `/file add` set as (path, text), and a note per file that cannot be read."""
        files: list[tuple[str, str]] = []
        notes: list[str] = []
        listed = await self.ledger.context_files(self.session)
        if not listed:
            return files, notes  # without importing the command layer (start-up time)
        root = Path(self.config.project_root).resolve()
        for f in listed:
            try:
                files.append(read_context_file(root, f.path))
            except ContextFileError as exc:
                notes.append(f"files: {f.path} left out ({exc}); /file remove {f.path} drops it")
        return files, notes

    async def _final_answer(self, group_id: int) -> str:
        """The last completed answer of a group (the quoted layer of a reply lane)."""
        rows = await self.ledger.group_messages(self.session, group_id)
        for m in reversed(rows):
            if m.role == "assistant" and m.status == STATUS_COMPLETED and m.content.strip():
                return m.content
        return ""


# What each kind of change makes the panes read again (the plan is read for any).
_READS_ROWS = Changed.HISTORY | Changed.SESSION | Changed.WINDOW | Changed.LANE
_READS_SESSIONS = Changed.HISTORY | Changed.SESSION
_READS_STATE = Changed.HISTORY | Changed.SESSION | Changed.STATE


@dataclass(frozen=True)
class Snapshot:
    """One read of what the panes show, for a set of changes (`Workspace.snapshot`).
    A part the change set does not touch is None: the pane keeps what it shows."""

    changed: Changed
    choice: ProviderChoice
    session: Session
    plan: ContextPlan
    estimated: bool  # the plan's counts are partly estimates (no tokenizer yet)
    context_window: int
    prompt_series: list[int]  # prompt tokens per call, oldest first
    cached_tokens: int | None  # of the last call
    background: tuple[int, int]  # background calls and their tokens
    rows: list[tuple] | None = None  # the group list's rows (`Ledger.group_rows`)
    sessions: list[SessionSummary] | None = None
    state: StateVersion | None = None
    failed_prompts: list[int] | None = None  # the prompts marked ! (newest first)


def sandbox_can_run(config: Config, env: Mapping[str, str]) -> bool:
    """Whether the sandbox `detect_sandbox` builds for `config` and `env` is available:
    the same answer (`bwrap_probe.unavailable`), without importing or building the
    sandbox. Waits for bwrap's probe (a process) the first time: call it in a thread."""
    from slop_tui.tools import bwrap_probe

    return bwrap_probe.unavailable(config.sandbox_mode, env)[0] is not None


def detect_sandbox(config: Config, env: Mapping[str, str]) -> Sandbox:
    """The OS sandbox shell commands run in, for `config` and `env` (probing bwrap
    starts a process, ~30 ms: `Workspace.sandbox` does it once, on first use)."""
    from slop_tui.config import user_config_path
    from slop_tui.tools.sandbox import detect
    from slop_tui.trust import trust_file

    user_config = user_config_path(env)
    return detect(
        config.sandbox_mode,
        env,
        network=config.shell_network,
        secret_files=(user_config, trust_file(user_config.parent)),
    )


class HistoryReader:
    """What a pane may read of one session's history: its groups and their messages.
    Read only, and bound to one session, so a pane holds this instead of the
    workspace or the ledger (the conversation pages older groups in through it)."""

    def __init__(self, ledger: Ledger, session: str, root: Path | None = None) -> None:
        self._ledger = ledger
        self.session = session
        self._root = root  # the project, where `.slop/images/` keeps the images

    async def message_images(self, message_ids: Collection[int]) -> dict[int, list[ImageRef]]:
        """The images attached to each of `message_ids` that has any."""
        return await self._ledger.message_images(message_ids) if message_ids else {}

    def image_file(self, ref: ImageRef) -> Path | None:
        """Where an attached image's bytes are (None: no project known)."""
        from slop_tui.images import image_path

        return image_path(self._root, ref.sha256, ref.mime) if self._root is not None else None

    async def group_messages(self, group_id: int) -> list[Message]:
        return await self._ledger.group_messages(self.session, group_id)

    async def message_text(self, message_id: int) -> str | None:
        msg = await self._ledger.get_message(message_id)
        return msg.content if msg is not None else None

    async def group_ids(self) -> list[int]:
        """Every group of the session, oldest first."""
        return await self._ledger.group_ids(self.session)

    async def group_rows(self, prompt_chars: int, prompts_for_newest: int | None) -> list[tuple]:
        """The group list's rows (`Ledger.group_rows`)."""
        return await self._ledger.group_rows(
            self.session, prompt_chars, prompts_for_newest=prompts_for_newest
        )

    async def group_prompts(self, below: int, prompt_chars: int) -> dict[int, str]:
        """The prompts of the groups older than `below` (`Ledger.group_prompts`)."""
        return await self._ledger.group_prompts(self.session, below, prompt_chars)

    async def group_snapshots(self, group_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
        """Each group's token snapshot: the (prompt, completion) tokens of its turn's last
        call (`Ledger.group_snapshots`); groups without a recorded call are left out."""
        return await self._ledger.group_snapshots(self.session, group_ids)


class ContextFileError(Exception):
    """A `/file` path that cannot be put into the context; the message is one sentence."""


def read_context_file(root: Path, path: str, label: str = "/file") -> tuple[str, str]:
    """(root-relative path, text) of a project file; ContextFileError when refused.

    The path rules are those of the file tools (tools.paths): inside the
    project root after resolving symlinks, a regular file, UTF-8 text.
    """
    from slop_tui.tools.base import ToolError
    from slop_tui.tools.paths import display, read_text, resolve_inside

    try:
        resolved = resolve_inside(root, path, label)
        shown = display(root, resolved)
        return shown, read_text(resolved, shown, label)
    except ToolError as exc:
        text, prefix = str(exc), f"{label}: "
        raise ContextFileError(text[len(prefix) :] if text.startswith(prefix) else text) from None


@dataclass(frozen=True)
class Edit:
    """An edit of the history, for a projection (`Workspace.plan(edit=...)`): groups as
    if dropped (`hide`) or restored (`show`)."""

    hide: frozenset[int] = frozenset()
    show: frozenset[int] = frozenset()

    @classmethod
    def drop(cls, group_id: int) -> Edit:
        return cls(hide=frozenset({group_id}))

    @classmethod
    def restore(cls, group_id: int) -> Edit:
        return cls(show=frozenset({group_id}))

    def invalidates(self, summary: Summary) -> bool:
        """Whether the edit takes this summary out of date (as `Ledger.history_changed`
        does: a summary whose span reaches an edited group)."""
        return any(summary.overlaps(g) for g in self.hide | self.show)


def _local_midnight() -> float:
    """Today's start in local time, as a time stamp (the day of `daily_cost_limit`)."""
    t = time.localtime()
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))


def _whole_groups(rows: list[Message], limit: int) -> tuple[list[Message], bool]:
    """The newest `limit` rows of `rows` (oldest first) without splitting a group, and
    whether nothing was left out."""
    if len(rows) <= limit:
        return rows, True
    kept = rows[len(rows) - limit :]
    cut = kept[0].group_id
    return [m for m in kept if m.group_id != cut], False


def _replied_group(window: list[Message]) -> int | None:
    """The group the running turn's prompt replies to from inside its lane (the prompt's
    `reply_to`), while that turn has no answer yet; else None."""
    if not window:
        return None
    gid = window[-1].group_id
    rows = [m for m in window if m.group_id == gid]
    if any(m.role == "assistant" and m.status == STATUS_COMPLETED for m in rows):
        return None
    prompt = next((m for m in rows if m.role == "user" and m.id == gid), None)
    if prompt is None or not prompt.payload:
        return None
    try:
        value = json.loads(prompt.payload).get("reply_to")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _last_answer_group(window: list[Message]) -> int | None:
    for m in reversed(window):
        if m.role == "assistant" and m.status == STATUS_COMPLETED:
            return m.group_id
    return None


def _json_list(raw: str | None) -> list[str]:
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []
