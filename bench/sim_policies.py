"""Baseline policies for bench/context_sim.py that are not configurations of slop-tui.

Each one sits between the workspace and the orchestrator: it reshapes the
assembled request, and the guard ladder then measures the reshaped one (the
ladder stays on: when a policy
leaves a request above 90 % of the input budget, elision and the emergency
truncation keep it sendable, for every policy alike). The sessions run with
the full history (window 0), tool outputs whole and compaction off; only the
policy decides what leaves the request.

- `PeerPolicy`, the common policy of other agents (goose, Codex, Claude Code
  in their auto-compaction): once a request passes `threshold_pct` % of the
  input budget, the model is asked to summarise everything but the last
  `keep_turns` turns (the request itself plus the summary instruction, like
  goose and Codex do), and that summary stands for those messages from then
  on; the next time the threshold is passed, the summary and what followed are
  summarised again. The calls and their tokens are counted like any other.
- `TruncatePolicy`, the naive client: the full history, the oldest exchanges
  left out until the request is under `threshold_pct` % (never the current
  exchange).

`install(ws, policy, model)` puts the policy in front of the workspace's requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from slop_tui.context.guards import (
    apply_plan,
    apply_summary,
    drop_messages,
    elide_tool_results,
    plan_reduction,
)
from slop_tui.context.prompt import KIND_NOTICE, Prompt, PromptMessage
from slop_tui.context.summaries import clean_summary, summary_request

# Room for the one-line notice that stands where the left-out messages were.
NOTICE_TOKENS = 100
LEFT_OUT = "[earlier messages were cut from this request]"
# (request) -> the model's reply text; the simulation's provider, called directly.
Call = Callable[[Prompt], Awaitable[str]]


def _history(prompt: Prompt) -> list[PromptMessage]:
    return [m for m in prompt.messages if m.kind is None]


def _exchanges(prompt: Prompt) -> list[list[PromptMessage]]:
    """The conversation as exchanges: a user message and everything up to the next one."""
    out: list[list[PromptMessage]] = []
    for m in _history(prompt):
        if m.role == "user" or not out:
            out.append([m])
        else:
            out[-1].append(m)
    return out


@dataclass
class PeerPolicy:
    """Summarise all but the last turns once the request passes the threshold."""

    call: Call
    max_input: int
    count: Callable[[str], int]
    threshold_pct: int = 90
    keep_turns: int = 3
    budget_tokens: int = 500
    summary: str = ""
    covered_upto: int = 0  # the newest message id the summary stands for
    summaries: int = 0
    _busy: bool = field(default=False, repr=False)

    def apply(self, prompt: Prompt) -> Prompt:
        """The request with the summary in place of the messages it covers."""
        if not self.summary:
            return prompt
        ids = [
            m.message_id
            for m in _history(prompt)
            if m.message_id is not None and m.message_id <= self.covered_upto
        ]
        return apply_summary(prompt, self.summary, ids, self.count) if ids else prompt

    async def shape(self, assembled: Prompt, display: bool = False) -> Prompt:
        """The request this policy sends instead of `assembled` (the full history)."""
        prompt = self.apply(assembled)
        if display or self._busy:
            return prompt  # a display request: never a model call
        if prompt.request_tokens * 100 < self.threshold_pct * self.max_input:
            return prompt
        exchanges = _exchanges(prompt)
        old = [m for ex in exchanges[: -self.keep_turns] for m in ex if m.message_id is not None]
        if not old:
            return prompt  # the last turns alone are this large: the guard ladder's turn
        keep = [m.message_id for ex in exchanges[-self.keep_turns :] for m in ex]
        keep_ids = [i for i in keep if i is not None]
        request = summary_request(prompt, keep_ids, self.budget_tokens, count_tokens=self.count)
        # A summary request must fit the model too: the oldest exchanges it cannot hold are
        # left out of it (as aider sends only the part of the head that fits).
        excess = request.request_tokens - self.max_input
        if excess > 0:
            drop: list[int] = []
            for ex in exchanges[: -self.keep_turns]:
                drop += [m.message_id for m in ex if m.message_id is not None]
                excess -= sum(m.tokens for m in ex)
                if excess < 0:
                    break
            request = summary_request(
                drop_messages(prompt, drop, self.count),
                keep_ids,
                self.budget_tokens,
                count_tokens=self.count,
            )
        # Still too large (the kept turns are): tool results elided middle-out, more and
        # more, as goose does before it summarises.
        for level in (10, 20, 50, 100):
            if request.request_tokens <= self.max_input:
                break
            request = elide_tool_results(request, level, self.count)
        if request.request_tokens > self.max_input:
            return prompt  # nothing to summarise that fits: the guard ladder's turn
        self._busy = True
        try:
            text = clean_summary(await self.call(request))
        finally:
            self._busy = False
        self.summary = text or "(the summary call returned nothing)"
        self.covered_upto = max(m.message_id for m in old if m.message_id is not None)
        self.summaries += 1
        return self.apply(assembled)


@dataclass
class TruncatePolicy:
    """The full history, the oldest exchanges left out until the request fits."""

    max_input: int
    count: Callable[[str], int]
    threshold_pct: int = 90
    truncations: int = 0

    async def shape(self, prompt: Prompt, display: bool = False) -> Prompt:
        """The request this policy sends instead of `prompt` (the full history)."""
        limit = self.threshold_pct * self.max_input // 100
        excess = prompt.request_tokens - limit + NOTICE_TOKENS
        if excess < 0:
            return prompt
        drop: list[int] = []
        for ex in _exchanges(prompt)[:-1]:
            drop += [m.message_id for m in ex if m.message_id is not None]
            excess -= sum(m.tokens for m in ex)
            if excess < 0:
                break
        if not drop:
            return prompt
        if not display:
            self.truncations += 1
        # The engine's way to leave messages out keeps the request valid; its pointer to
        # query_db is not the naive client's: a plain line stands there instead.
        cut = drop_messages(prompt, drop, self.count)
        messages = tuple(
            replace(m, text=LEFT_OUT, tokens=self.count(LEFT_OUT)) if m.kind == KIND_NOTICE else m
            for m in cut.messages
        )
        return replace(cut, messages=messages)


def install(ws, policy: PeerPolicy | TruncatePolicy, model: str) -> None:
    """Route the workspace's requests through `policy`, before the guard ladder.

    With the context plan (`Workspace.plan`, whose `request` the orchestrator
    sends) the plan's assembled request is shaped and the ladder planned again on
    it; without it, `Workspace.prompt` (what the orchestrator then sends, with the
    ladder after it) is wrapped.
    """
    if hasattr(ws, "plan"):
        real_plan = ws.plan

        async def plan(strategy=None, *, count_tokens=None, edit=None, **kwargs):
            got = await real_plan(strategy, count_tokens=count_tokens, edit=edit, **kwargs)
            display = count_tokens is not None or edit is not None
            shaped = await policy.shape(got.assembled, display)
            if shaped is got.assembled:
                return got
            count = count_tokens or ws.ledger.count_tokens
            guard = plan_reduction(
                shaped,
                ws.model_info(model),
                ws.compaction_settings(),
                count,
                summarized=kwargs.get("summarized", False),
                before_summary=kwargs.get("before_summary"),
            )
            request = apply_plan(shaped, guard, count)
            return replace(got, assembled=shaped, request=request, guard=guard)

        ws.plan = plan
        return
    real = ws.prompt

    async def prompt(strategy=None, *, count_tokens=None, upto=None):
        got = await real(strategy, count_tokens=count_tokens, upto=upto)
        return await policy.shape(got, display=count_tokens is not None)

    ws.prompt = prompt
