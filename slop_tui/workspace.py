"""The running workspace: the ledger, the current session and process-wide settings.

Per seed 001, the active skills and the request throttle belong to the
workspace, not to a session: switching sessions keeps them. They are stored
in the ledger's `app_state` so a restart keeps them too, together with the
last used session (auto-restore, seed 003).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from slop_tui.config import Config
from slop_tui.context import AssemblyInputs, ContextSettings, TruncationSettings, assemble
from slop_tui.context.memos import extract_keywords, latest_user_text, rank_memos
from slop_tui.context.prompt import Prompt, ToolSpec
from slop_tui.context.tokens import TokenCounter
from slop_tui.ledger import Ledger, LedgerError, check_session_name
from slop_tui.records import DEFAULT_SESSION, Session, Skill

KEY_SESSION = "current_session"
KEY_SKILLS = "active_skills"
KEY_THROTTLE = "throttle"
KEY_TOKEN_FACTOR = "token_factor"

Editor = Callable[[str, str], "str | None"]


@dataclass
class ProviderChoice:
    """Which provider and model the next request goes to."""

    name: str
    model: str
    strategy: str


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

    # -- lifecycle ---------------------------------------------------------

    @classmethod
    async def open(
        cls,
        config: Config,
        session: str | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        env: dict[str, str] | None = None,
    ) -> Workspace:
        ledger = await Ledger.open(config.db_path, count_tokens=count_tokens)
        try:
            ws = cls(ledger=ledger, config=config, session=DEFAULT_SESSION)
            if count_tokens is None:
                # Messages are counted once, when written, with the current model's counter.
                ledger.count_tokens = lambda text: ws.counter.count(text)
            if env is not None:
                ws.env = env
            stored = await ledger.get_setting(KEY_SESSION)
            ws.session = check_session_name(session) if session else (stored or DEFAULT_SESSION)
            ws.active_skills = _json_list(await ledger.get_setting(KEY_SKILLS))
            ws.throttle = float(await ledger.get_setting(KEY_THROTTLE, "0") or 0)
            await ws._register_tools()
            if session and session != stored:
                await ledger.set_setting(KEY_SESSION, session)
        except BaseException:
            await ledger.close()
            raise
        return ws

    async def close(self) -> None:
        await self.ledger.close()

    async def _register_tools(self) -> None:
        from slop_tui.tools import registry_rows

        await self.ledger.register_tools(registry_rows())

    # -- session and workspace state -------------------------------------

    async def current(self) -> Session:
        return await self.ledger.session_or_default(self.session)

    async def switch_session(self, name: str) -> None:
        self.session = check_session_name(name)
        await self.ledger.set_setting(KEY_SESSION, self.session)

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

    # -- providers ---------------------------------------------------------

    def provider_configs(self) -> dict:
        from slop_tui.providers.config import load_provider_configs

        configs, _errors = load_provider_configs(self.env, self.config.providers)
        return configs

    async def provider_choice(self) -> ProviderChoice:
        from slop_tui.providers.config import default_provider_name

        configs = self.provider_configs()
        sess = await self.current()
        name = sess.provider if sess.provider in configs else None
        if name is None:
            wanted = self.config.default_provider
            name = wanted if wanted in configs else default_provider_name(configs, self.env)
        cfg = configs[name]
        model = sess.model if (sess.provider == name and sess.model) else cfg.model
        if self.counter.model != model:
            stored = await self.ledger.get_setting(KEY_TOKEN_FACTOR + ":" + model)
            self.counter = TokenCounter(model, factor=float(stored) if stored else 1.0)
        strategy = "openai" if cfg.kind in ("openai", "demo") else cfg.kind
        return ProviderChoice(name=name, model=model, strategy=strategy)

    # -- the request -------------------------------------------------------

    def truncation(self) -> TruncationSettings:
        return TruncationSettings.from_mapping(dict(self.config.truncation))

    async def enabled_tools(self) -> list[ToolSpec]:
        from slop_tui.tools import tool_specs

        enabled = {t.name for t in await self.ledger.list_tools() if t.enabled}
        return [spec for spec in tool_specs() if spec.name in enabled]

    async def prompt(self, strategy: str | None = None) -> Prompt:
        """Assemble the next request from the ledger (what is shown is what is sent)."""
        if strategy is None:
            strategy = (await self.provider_choice()).strategy
        sess = await self.current()
        window = await self.ledger.window(self.session, sess.window_size, lane=sess.lane)
        state = await self.ledger.current_state(self.session)
        keywords = extract_keywords(latest_user_text(window))
        candidates, bm25 = await self.ledger.memo_candidates(keywords)
        memos = rank_memos(keywords, candidates, bm25)
        inputs = AssemblyInputs(
            session=sess,
            messages=window,
            strategy=strategy,
            state=state.content if state else None,
            scratchpad=sess.scratchpad,
            memos=memos,
            skills=await self.skills(),
            tools=await self.enabled_tools(),
        )
        settings = ContextSettings(truncation=self.truncation())
        return assemble(inputs, settings, self.ledger.count_tokens)


def _json_list(raw: str | None) -> list[str]:
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []
