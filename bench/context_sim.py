"""Long-session context benchmark: answerable facts, for how many tokens?

    python bench/context_sim.py [--turns N] [--quick] [--policy NAME ...] [--json FILE]

Replays the scripted coding session of `sim_script.py` (300 turns; tool
outputs from 200 B to 50 KB produced by the real tools; 53 facts planted and
asked about in the last fifth; a stress block of scripted phases that makes
every path of the engine run) through the real engine: the real `Ledger` (a
temporary SQLite file per policy), the real `Workspace` and the real
`Orchestrator`. Only the model is simulated (`SimProvider`): it follows the
script, calls real tools, and is deliberately unhelpful: its answers,
`### STATE` blocks and summaries are generic and never repeat a fact (the
script's one exception, a STATE that repeats one fact for a while, ends
before that fact is asked). So a fact found in a late request is there
because the engine kept it.

Policies, all on the same script and the same model window (128,000 tokens):

- `window`: the reference tool's default: the last 5 groups, the tool-result
  tiers, `[compaction] enabled = false`;
- `peer`: the common policy of other agents (`sim_policies.PeerPolicy`): the
  full history with tool outputs whole; once a request passes 90 % of the input
  budget, the model summarises everything but the last 3 turns;
- `truncate`: the full history with tool outputs whole, the oldest exchanges
  left out until the request is under 90 % of the input budget
  (`sim_policies.TruncatePolicy`);
- `default`: slop-tui as shipped (session window, tiers, STATE, guards,
  after-reply compaction, rolling lane summaries with anchors), with one
  setting added, `[compaction] detector_model`, so the topic boundary can be
  found (without a detector model the engine never truncates at a boundary);
- `default-cache` (only with `--policy`): the same with `[context] layout = "cache"`.

The guard ladder runs before every request for every policy (with compaction
off it elides, truncates in an emergency and sheds files, but never
summarises).

Measured per policy: cumulative tokens of every request the provider got
(the session's own and the background calls: summaries, topic boundaries),
model calls, peak request (all phases, and the ordinary phases alone), and
for every fact, in the first request of the turn that asks about it: whether
it is **answerable** (bench/answerable.py: its subject and value in one line
or bullet, or its planted sentence; an earlier value of a corrected fact must
not be presented as current) and whether its value is merely present. Per
scripted phase, how often each path fired. And recoverability: a sample of
the messages cut by a tier, elided or left out by a guard, or hidden behind a
summary is read back with the real `query_db` tool and compared with the
original text.

Tokens are the engine's own counts (`Prompt.request_tokens`: system text,
messages and tool declarations) with the workspace counter for `sim-model`
(o200k_base; the simulated provider reports the same count as usage, so the
learned factor stays 1.0).

Two diagnostics for the default policies, not part of the engine: `limbo`,
rows that are neither sent nor covered by the summary in the request (the
context plan's `waiting` and `outside` places), counted after every turn; and
a `recall probe`: for each
question, the 5 lines of summarized rows that share the most keywords with
it (the engine's own `extract_keywords`), and whether the key is among them:
what a keyword recall layer over compacted history would have kept.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import answerable  # noqa: E402
import sim_policies  # noqa: E402
import sim_script  # noqa: E402
from sim_script import FACTS, STRESS_PHASES, Plan, Turn  # noqa: E402

from slop_tui.commands import dispatch  # noqa: E402
from slop_tui.config import load_config  # noqa: E402
from slop_tui.context.compaction import BOUNDARY_INSTRUCTION, BOUNDARY_SYSTEM  # noqa: E402
from slop_tui.context.layout import longest_common_prefix, serialize_request  # noqa: E402
from slop_tui.context.prompt import KIND_NOTICE, PLACEMENT_SYSTEM, Prompt  # noqa: E402
from slop_tui.context.summaries import STANDALONE_SYSTEM  # noqa: E402
from slop_tui.context.tiers import TIER_OVERSIZE, TIER_PASTE  # noqa: E402
from slop_tui.orchestrator import REBUILD_INSTRUCTION, Orchestrator  # noqa: E402
from slop_tui.providers.base import (  # noqa: E402
    Provider,
    ProviderReply,
    TextDelta,
    dumps,
    payload_tool_calls,
)
from slop_tui.tools import ToolContext, run_tool  # noqa: E402
from slop_tui.workspace import Workspace  # noqa: E402

MODEL = "sim-model"
DETECTOR = "sim-detector"
WINDOW = 128_000
SUMMARY_MARK = "[slop-tui: context compaction request"
HUGE = 10**9
FULL_TIERS = {"active_full_limit": HUGE, "active_degraded_limit": HUGE, "inactive_limit": HUGE}
ORDINARY = ("plant", "work", "ask")
TARGET_ANSWERABLE_PCT = 95
TARGET_PEAK_PCT = 60
TARGET_MESSAGES_PER_SUMMARY = 30


@dataclass(frozen=True)
class Policy:
    name: str
    label: str
    window: int | None  # session window (None: the shipped default)
    context_window: int
    compaction: dict = field(default_factory=dict)
    truncation: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)
    driver: str = ""  # "peer" | "truncate": a sim_policies policy in front of the engine


_OFF = {"enabled": False}
_DETECTOR = {"detector_model": DETECTOR}
POLICIES = {
    "window": Policy("window", "window only (5 groups, tiers)", 5, WINDOW, _OFF),
    "peer": Policy(
        "peer", "peer: summarise at 90 %, keep 3 turns", 0, WINDOW, _OFF, FULL_TIERS, driver="peer"
    ),
    "truncate": Policy(
        "truncate",
        "full history, oldest cut to fit",
        0,
        WINDOW,
        _OFF,
        FULL_TIERS,
        driver="truncate",
    ),
    "default": Policy("default", "slop-tui default (+ detector)", None, WINDOW, _DETECTOR),
    "default-cache": Policy(
        "default-cache",
        "slop-tui default, cache layout",
        None,
        WINDOW,
        _DETECTOR,
        context={"layout": "cache"},
    ),
}
DEFAULT_POLICIES = ("window", "peer", "truncate", "default")
BASELINES = ("window", "peer", "truncate")

# --- the simulated model ---------------------------------------------------------------------


def _last_text(prompt: Prompt) -> str:
    return prompt.messages[-1].text if prompt.messages else ""


def classify(prompt: Prompt) -> str:
    """main (the session's own request), summary (the session's prefix plus the summary
    instruction), standalone-summary (a request holding only the rows summarised: the
    engine's lane, guard and after-reply summaries; the stored summaries say which),
    boundary, rebuild or other-summary."""
    last = _last_text(prompt)
    if SUMMARY_MARK in last:
        standalone = prompt.system_text.startswith(STANDALONE_SYSTEM)
        return "standalone-summary" if standalone else "summary"
    if prompt.system_text.startswith(BOUNDARY_SYSTEM) or BOUNDARY_INSTRUCTION[:60] in last:
        return "boundary"
    if REBUILD_INSTRUCTION in last:
        return "rebuild"
    if re.search(r"(?i)\bsummar(?:y|ise|ize)\b", last) and "slop-tui" in last:
        return "other-summary"
    return "main"


# Request kinds that are summary calls (the rate target counts them).
SUMMARY_KINDS = ("summary", "standalone-summary", "peer-summary", "other-summary")


@dataclass
class Request:
    turn: int
    kind: str
    step: int
    tokens: int
    chars: int
    phase: str = "work"
    lcp_chars: int = 0  # with the previous session request (main), or the last main (others)
    lcp_tokens: int = 0
    own_prompt: int = 0  # session requests: tokens of the turn's own user message in it


class Recorder:
    """Everything measured about the requests of one policy run."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.requests: list[Request] = []
        self.prev_main: Prompt | None = None
        self.last_main: Prompt | None = None
        self.survival: dict[str, dict] = {}
        self.cut_ids: dict[int, str] = {}  # message id -> "truncated" | "elided" | "dropped"
        self.hints_ok = 0
        self.hints_bad: list[int] = []
        self.turn: Turn | None = None
        self.first_main_seen = False
        self.mismatches = 0
        self.firings: dict[str, Counter] = defaultdict(Counter)  # phase -> path -> count

    def begin(self, turn: Turn) -> None:
        self.turn = turn
        self.first_main_seen = False

    def fire(self, what: str, n: int = 1) -> None:
        if self.turn is not None and n:
            self.firings[self.turn.phase][what] += n

    def on_request(self, kind: str, step: int, prompt: Prompt) -> None:
        assert self.turn is not None
        text = serialize_request(prompt)
        req = Request(self.turn.n, kind, step, prompt.request_tokens, len(text), self.turn.phase)
        ref = self.prev_main
        if ref is not None:
            req.lcp_chars = longest_common_prefix(ref, prompt)
            req.lcp_tokens = round(req.tokens * req.lcp_chars / max(1, len(text)))
        self.requests.append(req)
        self.fire("call:" + kind)
        if kind != "main":
            return
        history = [m for m in prompt.messages if m.kind is None]
        if history:
            active = history[-1].group_id
            req.own_prompt = sum(
                m.tokens for m in history if m.group_id == active and m.role == "user"
            )
        self.prev_main = prompt
        self.last_main = prompt
        # The turn's own message is absent only when the engine cut it (oversize tier).
        own_cut = any(m.tier == TIER_OVERSIZE for m in history)
        if self.turn.text not in text and not own_cut:
            self.mismatches += 1
        self._paths(prompt)
        if self.turn.asks and not self.first_main_seen:
            sections = answerable.prompt_sections(prompt)
            for fid in self.turn.asks:
                fact = self.plan.fact(fid)
                verdict = answerable.check_fact(fact.metric(), sections)
                self.survival[fid] = {
                    "turn": self.turn.n,
                    "kept": verdict.present,
                    "answerable": verdict.answerable,
                    "stale": verdict.stale,
                    "where": where_found(prompt, fact.key),
                    "answerable_in": list(verdict.where),
                }
        self.first_main_seen = True

    def _paths(self, prompt: Prompt) -> None:
        """What the engine did to this request: tier cuts (tool results, user messages
        of older groups under pressure, the turn's own oversized message), elision,
        emergency, shedding."""
        elided = 0
        for m in prompt.messages:
            if m.kind == KIND_NOTICE and m.text == sim_policies.LEFT_OUT:
                self.fire("oldest cut")
            if m.kind == KIND_NOTICE and "left out to fit" in m.text:
                self.fire("emergency")
                first, last = map(int, re.findall(r"#(\d+)", m.text)[:2])
                for mid in range(first, last + 1):
                    self.cut_ids.setdefault(mid, "dropped")
            if m.message_id is None or m.kind is not None or not m.truncated:
                continue
            if m.role != "tool" and m.tier not in (TIER_PASTE, TIER_OVERSIZE):
                continue
            if m.tier == "elided":
                elided += 1
            else:
                self.fire(f"cut:{m.tier}")
            elided_one = m.tier == "elided"
            self.cut_ids.setdefault(m.message_id, "elided" if elided_one else "truncated")
            if f"WHERE id={m.message_id}" in m.text:
                self.hints_ok += 1
            else:
                self.hints_bad.append(m.message_id)
        if elided:
            self.fire("elide")
            self.fire("elided results", elided)
        if any(n.startswith("files: removed") for n in prompt.notes):
            self.fire("shed")


def where_found(prompt: Prompt, key: str) -> list[str]:
    """The layers and message kinds that carry `key`."""
    out = []
    for layer in prompt.layers:
        if key in layer.text:
            out.append(
                f"layer:{layer.name}"
                + ("" if layer.placement == PLACEMENT_SYSTEM else f"({layer.placement})")
            )
    for m in prompt.messages:
        if m.kind is None and key in m.text:
            out.append(f"history:{m.role}")
        elif m.kind not in (None, "pinned", "context") and key in m.text:
            out.append(f"message:{m.kind}")
    return out


class SimProvider(Provider):
    """The scripted, deliberately unhelpful model (see sim_script)."""

    name = "sim"
    strategy = "openai"
    model = MODEL

    def __init__(self, recorder: Recorder, plan: Plan) -> None:
        self.rec = recorder
        self.plan = plan
        self.turn: Turn | None = None
        self.step = 0
        self.kinds: Counter[str] = Counter()
        self.next_kind = ""  # set by a baseline policy for its own calls

    def begin(self, turn: Turn) -> None:
        self.turn, self.step = turn, 0
        self.rec.begin(turn)

    def request_body(self, prompt: Prompt, model: str | None = None) -> dict:
        return {"model": model or self.model, "messages": len(prompt.messages)}

    def boundary_reply(self, prompt: Prompt) -> str:
        """The detector's answer: the block where the script changes the topic, if shown."""
        head = self.plan.topic[:60]
        for block in re.split(r"\n\n(?=\[\d+\] )", _last_text(prompt)):
            m = re.match(r"\[(\d+)\] USER: ", block)
            if m and head and block[m.end() :].startswith(head):
                return json.dumps(
                    {
                        "boundary_index": int(m.group(1)),
                        "boundary_reason": "the user changes the topic",
                        "confidence": 0.9,
                        "summary": "Earlier work on the repository.",
                    }
                )
        return sim_script.BOUNDARY_REPLY

    async def call(self, prompt: Prompt, kind: str) -> str:
        """A baseline policy's own model call (counted as `kind`)."""
        self.next_kind = kind
        text = ""
        async for ev in self.stream(prompt):
            if isinstance(ev, ProviderReply):
                text = ev.text
        return text

    async def stream(self, prompt: Prompt, model: str | None = None):
        assert self.turn is not None
        kind = self.next_kind or classify(prompt)
        self.next_kind = ""
        self.kinds[kind] += 1
        self.rec.on_request(kind, self.step, prompt)
        calls: list[sim_script.Call] = []
        if kind in SUMMARY_KINDS:
            text = sim_script.GENERIC_SUMMARY
        elif kind == "boundary":
            text = self.boundary_reply(prompt)
        elif kind == "rebuild":
            text = sim_script.STATE_TEMPLATE.format(n=self.turn.n)
        elif self.step < len(self.turn.steps):
            calls = self.turn.steps[self.step]
            text = sim_script.step_text(self.turn.n, self.step)
            self.step += 1
        else:
            text = sim_script.answer_text(self.turn.n, self.turn.state)
        if text:
            yield TextDelta(text)
        payload = None
        tool_calls = ()
        if calls:
            payload = dumps(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {
                            "id": f"call_{self.turn.n}_{self.step}_{i}",
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.args)},
                        }
                        for i, c in enumerate(calls)
                    ],
                }
            )
            tool_calls = payload_tool_calls("openai", text, payload)
        yield ProviderReply(
            text=text,
            tool_calls=tool_calls,
            payload=payload,
            finish_reason="tool_calls" if calls else "stop",
            # What a real provider bills: the text and the tool declarations.
            prompt_tokens=prompt.request_tokens,
            completion_tokens=max(1, len(text) // 4),
        )

    async def list_models(self) -> list[str]:
        return [MODEL, DETECTOR]

    async def aclose(self) -> None:
        return None


# --- one policy ------------------------------------------------------------------------------


@dataclass
class Result:
    policy: Policy
    turns: int
    seconds: float
    requests: list[Request]
    survival: dict[str, dict]
    compactions: int
    summaries: int
    summarized_rows: int
    events: Counter
    kinds: Counter
    errors: list[str]
    recover: dict
    tool_sizes: list[int]
    mismatches: int
    hints_ok: int
    hints_bad: list[int]
    summary_kinds: Counter = field(default_factory=Counter)
    log_kinds: Counter = field(default_factory=Counter)
    last_layers: dict = field(default_factory=dict)
    limbo: list[int] = field(default_factory=list)
    probe: dict = field(default_factory=dict)
    firings: dict = field(default_factory=dict)  # phase -> Counter of paths
    messages: int = 0  # rows the session's ledger holds at the end

    def main(self) -> list[Request]:
        return [r for r in self.requests if r.kind == "main"]

    def extra(self) -> list[Request]:
        return [r for r in self.requests if r.kind != "main"]

    def summary_calls(self) -> int:
        return sum(1 for r in self.requests if r.kind in SUMMARY_KINDS)

    def cumulative(self) -> int:
        return sum(q.tokens for q in self.requests)

    def peak(self, phases: tuple[str, ...] | None = None) -> int:
        return max(
            (q.tokens for q in self.requests if phases is None or q.phase in phases), default=0
        )

    def answerable(self) -> tuple[int, int]:
        return sum(1 for v in self.survival.values() if v["answerable"]), len(self.survival)

    def present(self) -> int:
        return sum(1 for v in self.survival.values() if v["kept"])

    def stale(self) -> int:
        return sum(1 for v in self.survival.values() if v["stale"])


async def settle(timeout: float = 60.0) -> None:
    """Wait for background work the turn started (after-reply compaction)."""
    me = asyncio.current_task()
    deadline = time.monotonic() + timeout
    while True:
        pending = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        if not pending or time.monotonic() > deadline:
            return
        await asyncio.wait(pending, timeout=max(0.01, deadline - time.monotonic()))


def make_config(policy: Policy, project: Path, db: Path, xdg: Path):
    cfg = load_config(db=str(db), env={"XDG_CONFIG_HOME": str(xdg)}, cwd=project)
    return dataclasses.replace(
        cfg,
        default_provider="sim",
        providers={"sim": {"kind": "openai", "model": MODEL, "base_url": "http://127.0.0.1:9/v1"}},
        models={MODEL: {"context_window": policy.context_window}},
        compaction=dict(policy.compaction),
        truncation=dict(policy.truncation),
        context=dict(policy.context),
        tools={"max_iterations": 50, "parallel": 4, "bash_timeout": 60},
    )


def tuned(policy: Policy, window: int | None, settings: list[str]) -> Policy:
    """A slop-tui policy with another session window or more `[compaction]` settings (for
    trying a tuning on the same script); the baselines are left as they are."""
    if policy.name in BASELINES or (window is None and not settings):
        return policy
    compaction = dict(policy.compaction)
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--compaction {item!r}: expected KEY=VALUE")
        try:
            compaction[key.strip()] = json.loads(value)
        except ValueError:
            compaction[key.strip()] = value
    extra = [f"window {window}"] if window is not None else []
    extra += [f"{k}={v}" for k, v in compaction.items() if policy.compaction.get(k) != v]
    return dataclasses.replace(
        policy,
        label=f"{policy.label}, " + ", ".join(extra),
        window=policy.window if window is None else window,
        compaction=compaction,
    )


def _driver(policy: Policy, ws: Workspace, provider: SimProvider):
    """The sim_policies policy of a baseline, installed in front of the engine (or None)."""
    if not policy.driver:
        return None
    max_in = ws.model_info(MODEL).max_input_tokens
    count = ws.ledger.count_tokens
    if policy.driver == "peer":

        async def call(request: Prompt) -> str:
            return await provider.call(request, "peer-summary")

        driver = sim_policies.PeerPolicy(call, max_in, count)
    else:
        driver = sim_policies.TruncatePolicy(max_in, count)
    sim_policies.install(ws, driver, MODEL)
    return driver


async def run_policy(
    policy: Policy, plan: Plan, project: Path, tmp: Path, sample: int, progress: bool
) -> Result:
    work = tmp / policy.name
    work.mkdir()
    cfg = make_config(policy, project, work / "slop.db", tmp / "xdg")
    ws = await Workspace.open(cfg, env={})
    rec = Recorder(plan)
    provider = SimProvider(rec, plan)
    orch = Orchestrator(ws, approve="all", provider_factory=lambda _cfg: provider)
    if policy.window is not None:
        await ws.ledger.ensure_session(ws.session)
        await ws.ledger.set_window(ws.session, policy.window)
    _driver(policy, ws, provider)
    events: Counter[str] = Counter()
    errors: list[str] = []
    originals: dict[int, str] = {}
    tool_sizes: list[int] = []
    limbo: list[int] = []
    gids: dict[int, int] = {}
    stored: Counter[str] = Counter()  # summaries by kind so far
    t0 = time.perf_counter()
    try:
        for turn in plan.turns:
            provider.begin(turn)
            listed = {f.path for f in await ws.ledger.context_files(ws.session)}
            for command in turn.before:
                if command.startswith("/file remove ") and command.split()[-1] not in listed:
                    continue  # already out of the context (a shed file can leave the list)
                result = await dispatch(ws, command)
                if not result.ok:
                    errors.append(f"turn {turn.n}: {command}: {result.text}")
            outcome = await orch.run_turn(turn.text)
            await orch.wait_background()  # after-reply compaction, lane summary
            await settle()
            # Background events land in the same outcome, so read them after the wait.
            for e in outcome.events:
                if e.kind == "compaction":
                    events[f"compaction:{e.phase}:{e.case or '-'}"] += 1
                events[e.kind] += 1
                if e.kind == "budget_warning":
                    rec.fire("warn")
                if e.kind == "tool_result":
                    originals[e.message_id] = e.text
                    tool_sizes.append(len(e.text.encode()))
                elif e.kind == "error":
                    errors.append(f"turn {turn.n}: {e.message}")
                elif e.kind == "notice" and len(errors) < 50 and "rejected" in e.text:
                    errors.append(f"turn {turn.n}: {e.text}")
            now = Counter(x.kind for x in await ws.ledger.summaries(ws.session))
            for kind, n in (now - stored).items():
                rec.fire(f"stored:{kind}", n)
            stored = now
            if outcome.group_id is not None:
                originals[outcome.group_id] = turn.text
                gids[turn.n] = outcome.group_id
            if policy.compaction.get("enabled", True) and policy.window != 0:
                limbo.append(await count_limbo(ws))
            if progress and turn.n % 25 == 0:
                el = time.perf_counter() - t0
                print(
                    f"  [{policy.name}] turn {turn.n}/{len(plan.turns)} {el:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        seconds = time.perf_counter() - t0
        summaries = await ws.ledger.summaries(ws.session)
        log = await ws.ledger.compaction_log(ws.session, limit=100_000)
        last_layers = rec.last_main.layer_tokens() if rec.last_main else {}
        rows = await ws.ledger.session_messages(ws.session)
        final = await ws.plan()
        summarized = [
            m
            for m in rows
            if m.group_id is not None
            and final.group_place(m.group_id, m.lane, m.status).place == "summary"
        ]
        recover = await check_recovery(ws, project, rec.cut_ids, summarized, originals, sample)
        probe = recall_probe(plan, summarized, gids) if summarized else {}
    finally:
        await orch.aclose()
        await ws.close()
    return Result(
        policy=policy,
        turns=len(plan.turns),
        seconds=seconds,
        requests=rec.requests,
        survival=rec.survival,
        compactions=len(log),
        summaries=len(summaries),
        summary_kinds=Counter(x.kind for x in summaries),
        log_kinds=Counter(x.case_kind for x in log),
        last_layers=last_layers,
        limbo=limbo,
        probe=probe,
        summarized_rows=len(summarized),
        events=events,
        kinds=provider.kinds,
        errors=errors,
        recover=recover,
        tool_sizes=tool_sizes,
        mismatches=rec.mismatches,
        hints_ok=rec.hints_ok,
        hints_bad=rec.hints_bad,
        firings={k: dict(v) for k, v in rec.firings.items()},
        messages=len(rows),
    )


async def count_limbo(ws: Workspace) -> int:
    """Visible rows of the lane neither sent nor covered by the summary in the request."""
    plan = await ws.plan()
    rows = await ws.ledger.window(ws.session, 0, lane=plan.lane)
    return sum(
        1
        for m in rows
        if plan.group_place(m.group_id, m.lane, m.status).place in ("waiting", "outside")
    )


def _words(text: str) -> set[str]:
    return set(extract_keywords_all(text))


def extract_keywords_all(text: str) -> list[str]:
    from slop_tui.context.memos import _SEPARATORS, STOP_WORDS

    return [t for t in _SEPARATORS.split(text.lower()) if len(t) > 3 and t not in STOP_WORDS]


def _match(q: str, words: set[str]) -> bool:
    return any(w == q or w.startswith(q) or q.startswith(w) for w in words if len(w) > 3)


def recall_probe(plan: Plan, summarized, gids: dict[int, int], top: int = 5) -> dict:
    """Counterfactual: would the 5 best keyword-matching lines of the summarized rows hold
    the key? (Diagnostic only; the engine has no such layer.)"""
    from slop_tui.context.memos import extract_keywords

    lines: list[tuple[int, str, set[str]]] = []
    for m in summarized:
        for line in m.content.splitlines():
            if line.strip():
                lines.append((m.id, line, _words(line)))
    found, total, chars, fids = 0, 0, 0, []
    for t in plan.turns:
        for fid in t.asks:
            fact = plan.fact(fid)
            qs = extract_keywords(fact.question)
            scored = []
            for mid, line, words in lines:
                if mid >= gids.get(t.n, 10**12):  # only rows older than the asking turn
                    continue
                score = sum(1 for q in qs if _match(q, words))
                if score:
                    scored.append((score, mid, line))
            scored.sort(key=lambda x: (-x[0], -x[1]))
            best = scored[:top]
            total += 1
            chars += sum(len(x[2][:300]) for x in best)
            hit = any(fact.key in x[2] for x in best)
            found += hit
            if hit:
                fids.append(fid)
    return {"found": found, "asked": total, "mean_chars": chars // max(1, total), "fids": fids}


def _query_rows(text: str) -> list[dict]:
    start = text.find("[")
    if start < 0:
        return []
    try:
        rows, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return []
    return rows if isinstance(rows, list) else []


async def read_back(ctx: ToolContext, mid: int) -> str | None:
    """The content of message `mid` as the model would read it through query_db (paged)."""
    res = await run_tool("query_db", {"sql": f"SELECT content FROM messages WHERE id={mid}"}, ctx)
    rows = _query_rows(res.text)
    if not res.ok or not rows:
        return None
    content = rows[0].get("content")
    if isinstance(content, str) and "… [cut: " not in content:
        return content
    out, page, at = [], 40_000, 1  # too long for one result: page with substr, as the hint says
    while True:
        sql = f"SELECT substr(content, {at}, {page}) AS part FROM messages WHERE id={mid}"
        res = await run_tool("query_db", {"sql": sql}, ctx)
        rows = _query_rows(res.text)
        part = rows[0].get("part") if rows else None
        if not part:
            return "".join(out)
        out.append(part)
        at += page


async def check_recovery(
    ws: Workspace,
    project: Path,
    cut_ids: dict[int, str],
    summarized,
    originals: dict[int, str],
    sample: int,
) -> dict:
    ctx = ToolContext(ledger=ws.ledger, session=ws.session, project_root=project)
    rnd = random.Random(1)
    out: dict[str, dict] = {}
    groups = {
        "truncated": sorted(i for i, k in cut_ids.items() if k == "truncated"),
        "elided": sorted(i for i, k in cut_ids.items() if k == "elided"),
        "dropped": sorted(i for i, k in cut_ids.items() if k == "dropped"),
        "summarized": sorted(m.id for m in summarized),
    }
    for label, ids in groups.items():
        picked = ids if sample <= 0 or len(ids) <= sample else sorted(rnd.sample(ids, sample))
        ok, bad = 0, []
        for mid in picked:
            truth = originals.get(mid)
            if truth is None:  # an assistant row: the ledger's copy is the original
                msg = await ws.ledger.get_message(mid)
                truth = msg.content if msg else None
            got = await read_back(ctx, mid)
            if truth is not None and got == truth:
                ok += 1
            else:
                bad.append(mid)
        out[label] = {"total": len(ids), "checked": len(picked), "ok": ok, "bad": bad[:10]}
    return out


# --- report ----------------------------------------------------------------------------------


def _k(n: float) -> str:
    if n >= 10_000_000:
        return f"{n / 1e6:,.0f} M"
    if n >= 1_000_000:
        return f"{n / 1e6:,.1f} M"
    if n >= 10_000:
        return f"{n / 1e3:,.0f} k"
    return f"{n:,.0f}"


def _pct(n: float, d: float) -> str:
    return f"{n * 100 / d:.1f} %" if d else "-"


def _row(what: str, value: str, passed: bool) -> str:
    return f"  {what}: {value}  {'PASS' if passed else 'FAIL'}"


def _targets(results: list[Result]) -> list[str]:
    """The `targets:` block (`  what: value  PASS|FAIL`) that bench/run_all.py collects."""
    r = next((r for r in results if r.policy.name == "default"), None)
    if r is None:
        return []
    by = {x.policy.name: x for x in results}
    out = ["targets:"]
    win = by.get("window")
    if win is not None:
        out.append(
            _row(
                "cumulative tokens <= window-only's",
                f"{_k(r.cumulative())} vs {_k(win.cumulative())} "
                f"({r.cumulative() / max(1, win.cumulative()):.2f}x)",
                r.cumulative() <= win.cumulative(),
            )
        )
    ok, asked = r.answerable()
    peers = {n: by[n].answerable()[0] for n in ("peer", "truncate") if n in by}
    above = all(ok > v for v in peers.values())
    both = " and above both peer policies" if len(peers) == 2 else " (peer policies not run)"
    out.append(
        _row(
            f"answerable facts >= {TARGET_ANSWERABLE_PCT} %{both}",
            f"{ok}/{asked} = {ok * 100 / max(1, asked):.1f} %"
            + (
                " (peers: " + ", ".join(f"{n} {v}" for n, v in peers.items()) + ")" if peers else ""
            ),
            asked > 0 and ok * 100 >= TARGET_ANSWERABLE_PCT * asked and above,
        )
    )
    win_tokens = r.policy.context_window
    for label, phases in (("ordinary phases", ORDINARY), ("stress phases included", None)):
        peak = r.peak(phases)
        top = max(
            (q for q in r.requests if phases is None or q.phase in phases),
            key=lambda q: q.tokens,
            default=None,
        )
        # The user's own message of the turn the request belongs to, named when it alone
        # is most of the peak.
        own = ""
        if top is not None and top.own_prompt * 100 >= TARGET_PEAK_PCT * win_tokens // 2:
            own = (
                f" (turn {top.turn}: its own prompt alone is {_k(top.own_prompt)} = "
                f"{_pct(top.own_prompt, win_tokens)})"
            )
        out.append(
            _row(
                f"peak request <= {TARGET_PEAK_PCT} % of the window, {label}",
                f"{_k(peak)} = {_pct(peak, win_tokens)}{own}",
                peak * 100 <= TARGET_PEAK_PCT * win_tokens,
            )
        )
    checked = sum(v["checked"] for v in r.recover.values())
    good = sum(v["ok"] for v in r.recover.values())
    out.append(
        _row(
            "cut or summarized messages read back identical through query_db",
            f"{good}/{checked} checked",
            good == checked,
        )
    )
    calls = r.summary_calls()
    out.append(
        _row(
            f"at most 1 summary call per {TARGET_MESSAGES_PER_SUMMARY} messages",
            f"{calls} calls for {r.messages:,} messages = 1 per {r.messages / max(1, calls):.1f}",
            calls * TARGET_MESSAGES_PER_SUMMARY <= r.messages,
        )
    )
    return out


# The paths of the engine, as the phase table names them.
PATHS = (
    ("warn", "warn"),
    ("cut:full", "tier full"),
    ("cut:degraded", "tier degraded"),
    ("cut:inactive", "tier inactive"),
    ("cut:paste", "paste cut"),
    ("cut:oversize", "own cut"),
    ("elide", "elide"),
    ("stored:guard", "guard summary"),
    ("stored:compaction", "after-reply summary"),
    ("call:boundary", "boundary"),
    ("stored:truncate", "truncate"),
    ("emergency", "emergency"),
    ("shed", "shed"),
    ("oldest cut", "oldest cut"),
    ("stored:lane", "lane summary"),
    ("call:peer-summary", "peer summary"),
)


def phase_table(r: Result) -> list[str]:
    """Per scripted phase: turns, session requests, the tokens of every call made in it
    (background ones included), and how often each path fired."""
    phases = [p for p in sim_script.PHASES if p in r.firings]
    turns = Counter(q.phase for q in r.requests if q.kind == "main" and q.step == 0)
    tokens = Counter()
    for q in r.requests:
        tokens[q.phase] += q.tokens
    used = [(k, label) for k, label in PATHS if any(r.firings[p].get(k) for p in phases)]
    head = f"  {'phase':<11} {'turns':>5} {'requests':>8} {'tokens':>7} " + " ".join(
        f"{label:>{max(6, len(label))}}" for _, label in used
    )
    lines = [head]
    for p in phases:
        f = r.firings[p]
        lines.append(
            f"  {p:<11} {turns.get(p, 0):>5} {f.get('call:main', 0):>8} {_k(tokens[p]):>7} "
            + " ".join(f"{f.get(k, 0):>{max(6, len(label))}}" for k, label in used)
        )
    return lines


def report(results: list[Result], plan: Plan) -> str:
    lines: list[str] = []
    sizes = sorted(s for r in results[:1] for s in r.tool_sizes)
    kinds = Counter(t.kind for t in plan.turns)
    n_user = sum(1 for f in FACTS if f.source == "user")
    stress = [t.n for t in plan.turns if t.phase in STRESS_PHASES]
    lines.append(
        f"Scenario: {len(plan.turns)} turns ({kinds['tool']} with tools, {kinds['chat']} chat, "
        f"{kinds['ask']} asking), {len(FACTS)} facts ({n_user} said by the user, "
        f"{len(FACTS) - n_user} in tool outputs), asked in turns {plan.ask_from}-"
        f"{len(plan.turns)}; stress phases in turns {min(stress)}-{max(stress)}."
    )
    if sizes:
        med = sizes[len(sizes) // 2]
        lines.append(
            f"Tool outputs: {len(sizes)} results, {sizes[0]:,} B to {sizes[-1]:,} B "
            f"(median {med:,} B, total {sum(sizes) / 1e6:.1f} MB)."
        )
    lines.append(
        "Tokens: the engine's own count (o200k_base via the workspace counter), "
        "system text + messages + tool declarations."
    )
    lines.append("")
    lw = max(38, *(len(r.policy.label) for r in results))
    head = (
        f"{'policy':<{lw}} {'calls':>6} {'backgr.':>7} {'cumulative':>10} {'backgr. tok':>11} "
        f"{'vs window':>9} {'peak':>7} {'peak/win':>8} {'ordinary':>8} {'answerable':>10} "
        f"{'present':>7} {'stale':>5} {'msgs/summary':>12} {'time':>6}"
    )
    lines.append(head)
    lines.append("-" * len(head))
    win = next((r for r in results if r.policy.name == "window"), None)
    for r in results:
        extra = r.extra()
        cum = r.cumulative()
        ok, asked = r.answerable()
        calls = r.summary_calls()
        rate = f"{r.messages / calls:.1f}" if calls else "-"
        w = r.policy.context_window
        lines.append(
            f"{r.policy.label:<{lw}} {len(r.requests):>6} {len(extra):>7} {_k(cum):>10} "
            f"{_k(sum(q.tokens for q in extra)):>11} "
            f"{(f'{cum / win.cumulative():.2f}x' if win else '-'):>9} {_k(r.peak()):>7} "
            f"{_pct(r.peak(), w):>8} {_pct(r.peak(ORDINARY), w):>8} "
            f"{f'{ok}/{asked}':>10} {f'{r.present()}/{asked}':>7} {r.stale():>5} {rate:>12} "
            f"{r.seconds:>5.0f}s"
        )
    lines.append("")
    lines.append(
        "calls: every model call (session requests and background calls); backgr.: the "
        "background calls alone (summaries, topic boundaries); cumulative: the tokens of all "
        "calls, background included; vs window: cumulative / window-only's."
    )
    lines.append(
        "peak: the largest request; peak/win: of the 128,000-token window; ordinary: the "
        "largest request outside the stress phases, of the window."
    )
    lines.append(
        "answerable: facts whose subject and value are together in the request of the turn "
        "that asks (bench/answerable.py); present: the value anywhere (string presence); "
        "stale: an earlier value of a corrected fact presented as current."
    )
    lines.append(
        "msgs/summary: the session's messages per summary call (lane, guard, after-reply "
        "or peer summary; topic-boundary calls not included)."
    )
    lines.append("")
    lines.append(
        f"Targets (default policy): cumulative <= window-only's; answerable >= "
        f"{TARGET_ANSWERABLE_PCT} % and above both peer policies; peak <= {TARGET_PEAK_PCT} % "
        "of the window; every cut or summarized message recoverable through query_db; at most "
        f"1 summary call per {TARGET_MESSAGES_PER_SUMMARY} messages."
    )
    lines.extend(_targets(results))
    for r in results:
        lines.append("")
        lines.append(f"## {r.policy.label}")
        lines.append(
            "  per phase: session requests, tokens of all calls, paths fired (requests; "
            "summaries stored, for guard, after-reply, truncate and lane):"
        )
        lines.extend(phase_table(r))
        where = Counter(
            w for s in r.survival.values() if s["answerable"] for w in set(s["answerable_in"])
        )
        lines.append(
            "  answerable from: "
            + (", ".join(f"{w} x{n}" for w, n in where.most_common()) or "(nothing)")
        )
        lost = [f for f in FACTS if f.fid in r.survival and not r.survival[f.fid]["answerable"]]
        if len(lost) > 12:
            said = sum(1 for f in lost if f.source == "user")
            lines.append(
                f"  not answerable: {len(lost)} facts ({said} said by the user, "
                f"{len(lost) - said} in tool outputs)"
            )
        elif lost:
            lines.append(
                "  not answerable: "
                + ", ".join(
                    f"{f.fid} ({f.source}, {f.kind}"
                    + (", value present" if r.survival[f.fid]["kept"] else "")
                    + (", stale" if r.survival[f.fid]["stale"] else "")
                    + ")"
                    for f in lost
                )
            )
        rc = r.recover
        lines.append(
            "  recoverable via query_db: "
            + "; ".join(
                f"{k} {v['ok']}/{v['checked']} checked of {v['total']}"
                + (f" (bad ids {v['bad']})" if v["bad"] else "")
                for k, v in rc.items()
            )
        )
        extra = r.extra()
        if extra:
            by_kind = Counter(q.kind for q in extra)
            tokens = Counter()
            for q in extra:
                tokens[q.kind] += q.tokens
            summ = [q for q in extra if q.kind == "summary"]
            share = sum(q.lcp_chars for q in summ) * 100 / max(1, sum(q.chars for q in summ))
            lines.append(
                "  background calls: "
                + ", ".join(f"{k} x{n} ({_k(tokens[k])} tokens)" for k, n in by_kind.items())
                + (
                    f"; own-prefix summary requests share {share:.1f} % of their text with the "
                    "preceding session request"
                    if summ
                    else ""
                )
            )
        main = r.main()
        lcp_share = sum(q.lcp_chars for q in main[1:]) / max(1, sum(q.chars for q in main[1:]))
        lines.append(
            f"  longest common prefix with the previous session request: "
            f"{lcp_share * 100:.1f} % of the text"
        )
        if r.limbo:
            lines.append(
                f"  limbo (rows outside the window and not summarized, after each turn): "
                f"max {max(r.limbo)}, mean {sum(r.limbo) / len(r.limbo):.1f}, "
                f"last {r.limbo[-1]}"
            )
        if r.probe:
            union = {f for f, v in r.survival.items() if v["answerable"]} | set(r.probe["fids"])
            lines.append(
                f"  recall probe (diagnostic, not the engine): the 5 summarized lines "
                f"sharing most keywords with the question hold the key for "
                f"{r.probe['found']}/{r.probe['asked']} facts "
                f"(about {r.probe['mean_chars'] // 4} tokens per request); with the "
                f"answerable ones: {len(union)}/{len(r.survival)}"
            )
        if r.hints_bad:
            lines.append(f"  tool results cut without their own query_db hint: {r.hints_bad[:10]}")
        if r.last_layers:
            lines.append(
                "  last request, tokens per layer: "
                + ", ".join(f"{k} {v:,}" for k, v in r.last_layers.items())
            )
        lines.append(
            f"  summaries {r.summaries} {dict(r.summary_kinds)}, audit records "
            f"{dict(r.log_kinds)}, rows summarized {r.summarized_rows}"
        )
        lines.append(
            f"  "
            f"request kinds {dict(r.kinds)}; events "
            f"{dict(sorted((k, v) for k, v in r.events.items() if k not in ('text',)))}"
        )
        if r.mismatches:
            lines.append(f"  WARNING: {r.mismatches} session requests lacked the scripted prompt")
        for e in r.errors[:5]:
            lines.append(f"  error: {e}")
    return "\n".join(lines)


def write_project(plan: Plan, project: Path) -> None:
    for rel, text in plan.files.items():
        p = project / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


async def main_async(args: argparse.Namespace) -> int:
    turns = 60 if args.quick and args.turns is None else (args.turns or 300)
    ask_from = 50 if args.quick and args.turns is None else None
    plan = sim_script.build_plan(turns, seed=args.seed, ask_from=ask_from)
    names = args.policy or list(DEFAULT_POLICIES)
    policies = [tuned(POLICIES[n], args.window, args.compaction or []) for n in names]
    results = []
    with tempfile.TemporaryDirectory(prefix="slop-context-sim-") as d:
        tmp = Path(d)
        project = tmp / "project"
        write_project(plan, project)
        (tmp / "xdg").mkdir()
        for policy in policies:
            res = await run_policy(policy, plan, project, tmp, args.sample, not args.no_progress)
            results.append(res)
    print(report(results, plan))
    if args.json:
        data = [
            {
                "policy": r.policy.name,
                "seconds": r.seconds,
                "requests": [dataclasses.asdict(q) for q in r.requests],
                "survival": r.survival,
                "compactions": r.compactions,
                "summaries": r.summaries,
                "recover": r.recover,
                "events": dict(r.events),
                "firings": r.firings,
                "messages": r.messages,
            }
            for r in results
        ]
        Path(args.json).write_text(json.dumps(data, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=None, help="turns to replay (default 300)")
    ap.add_argument("--quick", action="store_true", help="60 turns, facts asked at 50-60")
    ap.add_argument(
        "--policy",
        action="append",
        choices=list(POLICIES),
        help="run only this policy (repeatable; default: window, peer, truncate, default)",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--window", type=int, default=None, help="the slop-tui policies' session window"
    )
    ap.add_argument(
        "--compaction",
        action="append",
        metavar="KEY=VALUE",
        help="a [compaction] setting for the slop-tui policies (repeatable), e.g. "
        "lane_keep_recent=1",
    )
    ap.add_argument(
        "--sample",
        type=int,
        default=40,
        help="messages per kind read back through query_db (0: all)",
    )
    ap.add_argument("--json", help="also write the raw measurements here")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(main_async(args))
    return 130


if __name__ == "__main__":
    sys.exit(main())
