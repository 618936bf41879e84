"""The turn loop: the only place that sequences a turn.

persist the user message → assemble → stream → run tools → persist → loop,
then parse STATE and SCRATCHPAD blocks from the final answer. Every step
emits an event; the UI, `slop-tui ask` and the tests subscribe to them. No
Textual import here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import IO, Any

from slop_tui.context import extract_scratchpad_signal, extract_state
from slop_tui.context.isolation import message_tokens
from slop_tui.context.prompt import PromptMessage
from slop_tui.providers import ProviderError, create_provider
from slop_tui.providers.base import Provider, ProviderReply, TextDelta, ThinkingDelta
from slop_tui.providers.retry import RetryPolicy, stream_with_retries
from slop_tui.records import (
    STATUS_COMPLETED,
    STATUS_DROPPED,
    STATUS_INTERRUPTED,
    STATUS_TOOL_CALL,
    NewMessage,
    ToolCall,
)
from slop_tui.tools import approval_decision, get_tool, run_tool
from slop_tui.tools.base import ToolContext, ToolResult, error_result
from slop_tui.workspace import Workspace

# -- events ---------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    kind: str = ""


@dataclass(frozen=True)
class TurnStarted(Event):
    group_id: int = 0
    provider: str = ""
    model: str = ""
    kind: str = "turn_started"


@dataclass(frozen=True)
class TextChunk(Event):
    text: str = ""
    kind: str = "text"


@dataclass(frozen=True)
class ThinkingChunk(Event):
    text: str = ""
    kind: str = "thinking"


@dataclass(frozen=True)
class ToolCallEvent(Event):
    call_id: str = ""
    name: str = ""
    arguments: dict = field(default_factory=dict)
    kind: str = "tool_call"


@dataclass(frozen=True)
class ToolResultEvent(Event):
    call_id: str = ""
    name: str = ""
    ok: bool = True
    text: str = ""
    message_id: int = 0
    kind: str = "tool_result"


@dataclass(frozen=True)
class UsageEvent(Event):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    kind: str = "usage"


@dataclass(frozen=True)
class Notice(Event):
    text: str = ""
    kind: str = "notice"


@dataclass(frozen=True)
class ErrorEvent(Event):
    error_kind: str = ""
    message: str = ""
    kind: str = "error"


@dataclass(frozen=True)
class TurnFinished(Event):
    group_id: int = 0
    text: str = ""
    state_updated: bool = False
    scratchpad_updated: bool = False
    kind: str = "turn_finished"


Emit = Callable[[Event], Awaitable[None] | None]
# Asked before a write or shell tool runs: returns "allow", "allow_session" or "deny".
Approver = Callable[[ToolCall], Awaitable[str]]

REBUILD_INSTRUCTION = (
    "Re-read the conversation above and write a fresh, accurate `### STATE` block for it "
    "(Goal, Context, Resolved, Technical Anchors). Reply with the STATE block only."
)


@dataclass
class TurnOutcome:
    group_id: int | None = None
    text: str = ""
    error: str | None = None
    events: list[Event] = field(default_factory=list)

    def events_json(self) -> list[dict[str, Any]]:
        return [asdict(e) for e in self.events]


class Orchestrator:
    """Runs turns for one workspace."""

    def __init__(
        self,
        ws: Workspace,
        *,
        approve: str = "reads",
        approver: Approver | None = None,
        provider_factory: Callable[..., Provider] = create_provider,
        retry_policy: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.ws = ws
        self.approve = approve
        self.approver = approver
        self.provider_factory = provider_factory
        self.retry_policy = retry_policy or RetryPolicy()
        self.sleep = sleep
        self.session_allowed: set[str] = set()
        self._provider: Provider | None = None
        self._provider_key: tuple | None = None
        ws.rebuild_state = self.rebuild_state

    # -- providers -----------------------------------------------------------

    async def provider(self) -> tuple[Provider, str]:
        choice = await self.ws.provider_choice()
        cfg = self.ws.provider_configs()[choice.name]
        key = (cfg, choice.model)
        if self._provider is None or self._provider_key != key:
            await self.aclose()
            self._provider = self.provider_factory(cfg)
            self._provider_key = key
        return self._provider, choice.model

    async def aclose(self) -> None:
        if self._provider is not None:
            with contextlib.suppress(Exception):
                await self._provider.aclose()
            self._provider = None

    # -- the turn ------------------------------------------------------------

    async def run_turn(self, text: str, emit: Emit | None = None) -> TurnOutcome:
        """One whole turn; the user message is in the ledger before any network call."""
        outcome = TurnOutcome()

        async def send(event: Event) -> None:
            outcome.events.append(event)
            if emit is not None:
                result = emit(event)
                if inspect.isawaitable(result):
                    await result

        ws = self.ws
        choice = await ws.provider_choice()
        user = await ws.ledger.append_user(ws.session, text, strategy=choice.strategy)
        gid = user.group_id
        outcome.group_id = gid
        await send(TurnStarted(group_id=gid, provider=choice.name, model=choice.model))
        fixed_history = False
        iteration = 0
        while True:
            if iteration >= ws.config.max_iterations:
                msg = (f"Stopped after {iteration} tool-loop iterations (the limit is "
                       f"[tools] max_iterations = {ws.config.max_iterations}); ask again to continue.")
                await send(ErrorEvent(error_kind="max_iterations", message=msg))
                outcome.error = msg
                return outcome
            if iteration > 0 and ws.throttle > 0:
                await self.sleep(ws.throttle)
            provider, model = await self.provider()
            prompt = await ws.prompt(provider.strategy)
            try:
                reply = await self._stream(provider, prompt, model, gid, send)
            except ProviderError as err:
                if err.kind == "bad_request" and not fixed_history:
                    dropped = await self._drop_last_tool_exchange(gid)
                    if dropped:
                        fixed_history = True
                        await send(Notice(text=f"The provider rejected the request ({err.message}); "
                                               f"dropped the most recent tool exchange ({dropped} "
                                               "messages) and retried once."))
                        continue
                await self._keep_partial(gid, err.partial_text, provider.strategy)
                await send(ErrorEvent(error_kind=err.kind, message=err.message))
                outcome.error = err.message
                return outcome
            await ws.ledger.record_usage(ws.session, gid, provider.name, model, reply.prompt_tokens,
                                         reply.completion_tokens, reply.cached_tokens)
            await ws.learn_tokens(prompt.total_tokens, reply.prompt_tokens)
            await send(UsageEvent(prompt_tokens=reply.prompt_tokens,
                                  completion_tokens=reply.completion_tokens,
                                  cached_tokens=reply.cached_tokens))
            if reply.tool_calls:
                await self._tool_step(reply, provider.strategy, gid, send)
                iteration += 1
                continue
            return await self._finish(reply, provider.strategy, gid, send, outcome)

    async def _stream(self, provider: Provider, prompt, model: str, gid: int, send) -> ProviderReply:
        partial: list[str] = []

        async def on_retry(err: ProviderError, delay: float, attempt: int) -> None:
            await send(Notice(text=f"{err.message} Retrying in {delay:.0f} s "
                                   f"(attempt {attempt} of {self.retry_policy.max_retries})."))

        try:
            async for item in stream_with_retries(provider, prompt, model, self.retry_policy,
                                                  self.sleep, on_retry):
                if isinstance(item, TextDelta):
                    partial.append(item.text)
                    await send(TextChunk(text=item.text))
                elif isinstance(item, ThinkingDelta):
                    await send(ThinkingChunk(text=item.text))
                elif isinstance(item, ProviderReply):
                    return item
        except asyncio.CancelledError:
            await asyncio.shield(self._keep_partial(gid, "".join(partial), provider.strategy))
            raise
        raise ProviderError("truncated", f"{provider.name}: the stream ended without a reply.",
                            output_started=bool(partial), partial_text="".join(partial))

    async def _keep_partial(self, gid: int, text: str, strategy: str) -> None:
        """Partial text is kept as `interrupted`: shown, never replayed to the model."""
        if text:
            await self.ws.ledger.append(self.ws.session, gid, [NewMessage(
                role="assistant", content=text, status=STATUS_INTERRUPTED, strategy=strategy)])

    async def _tool_step(self, reply: ProviderReply, strategy: str, gid: int, send) -> None:
        ws = self.ws
        # Counted once, as the context engine will count it: text plus the calls.
        tokens = message_tokens(reply.text, reply.tool_calls, ws.ledger.count_tokens)
        await ws.ledger.append(ws.session, gid, [NewMessage(
            role="assistant", content=reply.text, status=STATUS_TOOL_CALL, payload=reply.payload,
            tool_call_id=reply.tool_calls[0].id, tool_name=reply.tool_calls[0].name,
            strategy=strategy, tokens=tokens)])
        for call in reply.tool_calls:
            await send(ToolCallEvent(call_id=call.id, name=call.name, arguments=dict(call.arguments)))
        cancel = asyncio.Event()
        ctx = ToolContext(ledger=ws.ledger, session=ws.session, project_root=ws.config.project_root,
                          bash_timeout=ws.config.bash_timeout, cancel_event=cancel)
        limit = asyncio.Semaphore(max(1, ws.config.parallel_tools))

        async def one(call: ToolCall) -> ToolResult:
            async with limit:
                return await self._run_call(call, ctx)

        tasks = [asyncio.create_task(one(c)) for c in reply.tool_calls]
        try:
            results = await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            cancel.set()
            for t in tasks:
                t.cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            results = [r if isinstance(r, ToolResult) else
                       error_result(c.name, "cancelled by the user before the tool finished.")
                       for c, r in zip(reply.tool_calls, done, strict=True)]
            await asyncio.shield(self._store_results(reply.tool_calls, results, strategy, gid))
            raise
        stored = await self._store_results(reply.tool_calls, results, strategy, gid)
        for call, res, msg in zip(reply.tool_calls, results, stored, strict=True):
            await send(ToolResultEvent(call_id=call.id, name=call.name, ok=res.ok, text=res.text,
                                       message_id=msg.id))
        await ws.reload_active_skills()

    async def _store_results(self, calls, results, strategy: str, gid: int):
        # One transaction for the whole batch, in call order.
        return await self.ws.ledger.append(self.ws.session, gid, [
            NewMessage(role="tool", content=r.text, status=r.status,
                       tool_call_id=c.id, tool_name=c.name, strategy=strategy)
            for c, r in zip(calls, results, strict=True)
        ])

    async def _run_call(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = get_tool(call.name)
        if tool is None:
            return error_result(call.name, f"there is no tool named '{call.name}'.")
        decision = approval_decision(tool, self.approve, self.session_allowed)
        if decision == "ask":
            answer = await self.approver(call) if self.approver else "deny"
            if answer == "allow_session":
                self.session_allowed.add(call.name)
            decision = "allow" if answer in ("allow", "allow_session") else "deny"
        if decision != "allow":
            return error_result(call.name, "the user did not approve this call; it was not run.")
        return await run_tool(call.name, dict(call.arguments), ctx)

    async def _finish(self, reply: ProviderReply, strategy: str, gid: int, send,
                      outcome: TurnOutcome) -> TurnOutcome:
        ws = self.ws
        status = STATUS_COMPLETED if reply.text.strip() else STATUS_INTERRUPTED
        await ws.ledger.append(ws.session, gid, [NewMessage(
            role="assistant", content=reply.text, status=status, payload=reply.payload,
            strategy=strategy)])
        state = extract_state(reply.text)
        if state:
            await ws.ledger.add_state(ws.session, gid, state)
        pad = extract_scratchpad_signal(reply.text)
        if pad is not None:
            await ws.ledger.set_scratchpad(ws.session, pad)
        if not reply.complete:
            await send(Notice(text=f"The model stopped early ({reply.finish_reason}); "
                                   "the answer may be cut."))
        await send(TurnFinished(group_id=gid, text=reply.text, state_updated=bool(state),
                                scratchpad_updated=pad is not None))
        outcome.text = reply.text
        return outcome

    async def _drop_last_tool_exchange(self, gid: int) -> int:
        """Soft-drop the most recent tool call row and its results (the 400 auto-fix)."""
        ws = self.ws
        sess = await ws.current()
        window = await ws.ledger.window(ws.session, max(sess.window_size, 10), lane=sess.lane)
        calls = [m for m in window if m.status == STATUS_TOOL_CALL]
        if not calls:
            return 0
        last = calls[-1]
        from slop_tui import message_parser

        ids = {c.id for c in message_parser.tool_calls(last)}
        victims = [last] + [m for m in window if m.role == "tool" and m.tool_call_id in ids
                            and m.id > last.id]
        for m in victims:
            await ws.ledger.set_message_status(m.id, STATUS_DROPPED)
        return len(victims)

    # -- STATE rebuild -------------------------------------------------------

    async def rebuild_state(self) -> str | None:
        """Ask the model for a fresh STATE from the current window; None if unreachable."""
        try:
            provider, model = await self.provider()
            prompt = await self.ws.prompt(provider.strategy)
            prompt = replace(prompt, tools=(), messages=(
                *prompt.messages, PromptMessage(role="user", text=REBUILD_INSTRUCTION)))
            reply = None
            async for item in stream_with_retries(provider, prompt, model,
                                                  RetryPolicy(max_retries=0), self.sleep):
                if isinstance(item, ProviderReply):
                    reply = item
        except ProviderError:
            return None
        state = extract_state(reply.text) if reply else None
        if not state:
            return None
        gid = await self.ws.ledger.last_group_id(self.ws.session)
        await self.ws.ledger.add_state(self.ws.session, gid, state)
        return state


async def run_headless_turn(
    ws: Workspace,
    prompt: str,
    *,
    provider: str | None = None,
    model: str | None = None,
    approve: str = "reads",
    echo: IO[str] | None = None,
) -> TurnOutcome:
    """`slop-tui ask`: one turn, nobody to ask for approval (writes are refused unless --approve all)."""
    if provider or model:
        configs = ws.provider_configs()
        choice = await ws.provider_choice()
        name = provider or choice.name
        if name not in configs:
            return TurnOutcome(error=f"there is no provider '{name}'; configured: {', '.join(configs)}.")
        await ws.ledger.set_provider(ws.session, name, model or configs[name].model)
    orch = Orchestrator(ws, approve=approve)

    def show(event: Event) -> None:
        if echo is None:
            return
        if isinstance(event, TextChunk):
            echo.write(event.text)
            echo.flush()
        elif isinstance(event, ToolCallEvent):
            echo.write(f"\n[tool] {event.name} {json.dumps(event.arguments, ensure_ascii=False)[:120]}\n")
        elif isinstance(event, Notice):
            echo.write(f"\n[notice] {event.text}\n")
        elif isinstance(event, TurnFinished):
            echo.write("\n")

    try:
        return await orch.run_turn(prompt, show)
    finally:
        await orch.aclose()
