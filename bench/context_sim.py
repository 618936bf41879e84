"""Long-session context benchmark: does the engine keep what matters, cheaply?

    python bench/context_sim.py [--turns N] [--quick] [--policy NAME ...] [--json FILE]

Replays the scripted coding session of `sim_script.py` (300 turns; tool
outputs from 200 B to 50 KB produced by the real tools; 40 facts planted in
turns 1-60 and asked about in turns 240-300) through the real engine: the
real `Ledger` (a temporary SQLite file per policy), the real `Workspace` and
the real `Orchestrator`. Only the model is simulated (`SimProvider`): it
follows the script, calls real tools, and is deliberately unhelpful: its
answers, `### STATE` blocks, summaries and topic-boundary answers are generic
and never repeat a fact. So a fact present in a late request is there because
the engine kept it.

Policies are configurations of the same engine:

- `full`: full history (window 0), tier limits of 10^9 characters (nothing
  cut), compaction disabled, a model window of 10^8 tokens so no guard acts;
- `window`: the reference tool's default: window 5, default tiers,
  `[compaction] enabled = false`;
- `default`: the shipped defaults (session window, tiers, STATE, guards,
  compaction, summaries with anchors, memos), `[models.sim-model]
  context_window = 128000` (a realistic window; every other setting shipped);
- `default-cache`: the same with `[context] layout = "cache"`.

Measured per policy: cumulative prompt tokens (every request the provider
got: the session's own, and the compaction requests separately), peak
request tokens, compactions (summaries written), the longest common prefix
between consecutive session requests (`layout.longest_common_prefix`, as a
share of the request; its token figure is that share of the request's
tokens), anchor survival (a fact's key verbatim in the serialized request of
the turn that asks about it), and recoverability: a sample of the messages
cut by a tier, elided by a guard or hidden behind a summary is read back with
the real `query_db` tool and compared with the original text.

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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import sim_script  # noqa: E402
from sim_script import FACTS, Plan, Turn  # noqa: E402

from slop_tui.config import load_config  # noqa: E402
from slop_tui.context.compaction import BOUNDARY_INSTRUCTION, BOUNDARY_SYSTEM  # noqa: E402
from slop_tui.context.layout import longest_common_prefix, serialize_request  # noqa: E402
from slop_tui.context.prompt import PLACEMENT_SYSTEM, Prompt  # noqa: E402
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
WINDOW = 128_000
SUMMARY_MARK = "[slop-tui: context compaction request"
HUGE = 10**9
FULL_TIERS = {"active_full_limit": HUGE, "active_degraded_limit": HUGE, "inactive_limit": HUGE}


@dataclass(frozen=True)
class Policy:
    name: str
    label: str
    window: int | None  # session window (None: the shipped default)
    context_window: int
    compaction: dict = field(default_factory=dict)
    truncation: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)


POLICIES = {
    "full": Policy("full", "full history", 0, 100_000_000, {"enabled": False}, FULL_TIERS),
    "window": Policy("window", "window only (5, tiers)", 5, WINDOW, {"enabled": False}),
    "default": Policy("default", "slop-tui default", None, WINDOW),
    "default-cache": Policy(
        "default-cache", "slop-tui default, cache layout", None, WINDOW, context={"layout": "cache"}
    ),
}

# --- the simulated model ---------------------------------------------------------------------


def _last_text(prompt: Prompt) -> str:
    return prompt.messages[-1].text if prompt.messages else ""


def classify(prompt: Prompt) -> str:
    """main (the session's own request), summary, boundary, rebuild or other."""
    last = _last_text(prompt)
    if SUMMARY_MARK in last:
        return "summary"
    if prompt.system_text.startswith(BOUNDARY_SYSTEM) or BOUNDARY_INSTRUCTION[:60] in last:
        return "boundary"
    if REBUILD_INSTRUCTION in last:
        return "rebuild"
    if re.search(r"(?i)\bsummar(?:y|ise|ize)\b", last) and "slop-tui" in last:
        return "other-summary"
    return "main"


@dataclass
class Request:
    turn: int
    kind: str
    step: int
    tokens: int
    chars: int
    lcp_chars: int = 0  # with the previous session request (main), or the last main (others)
    lcp_tokens: int = 0


class Recorder:
    """Everything measured about the requests of one policy run."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.requests: list[Request] = []
        self.prev_main: Prompt | None = None
        self.last_main: Prompt | None = None
        self.survival: dict[str, dict] = {}
        self.cut_ids: dict[int, str] = {}  # message id -> "truncated" | "elided"
        self.hints_ok = 0
        self.hints_bad: list[int] = []
        self.turn: Turn | None = None
        self.first_main_seen = False
        self.mismatches = 0

    def begin(self, turn: Turn) -> None:
        self.turn = turn
        self.first_main_seen = False

    def on_request(self, kind: str, step: int, prompt: Prompt) -> None:
        assert self.turn is not None
        text = serialize_request(prompt)
        req = Request(self.turn.n, kind, step, prompt.request_tokens, len(text))
        ref = self.prev_main
        if ref is not None:
            req.lcp_chars = longest_common_prefix(ref, prompt)
            req.lcp_tokens = round(req.tokens * req.lcp_chars / max(1, len(text)))
        self.requests.append(req)
        if kind != "main":
            return
        self.prev_main = prompt
        self.last_main = prompt
        if self.turn.text not in text:
            self.mismatches += 1
        for m in prompt.messages:
            if m.message_id is None or m.role != "tool":
                continue
            if m.tier == "elided" or m.truncated:
                self.cut_ids.setdefault(
                    m.message_id, "elided" if m.tier == "elided" else "truncated"
                )
                if f"WHERE id={m.message_id}" in m.text:
                    self.hints_ok += 1
                else:
                    self.hints_bad.append(m.message_id)
        if self.turn.asks and not self.first_main_seen:
            for fid in self.turn.asks:
                fact = self.plan.fact(fid)
                self.survival[fid] = {
                    "turn": self.turn.n,
                    "kept": fact.key in text,
                    "where": where_found(prompt, fact.key),
                }
        self.first_main_seen = True


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

    def __init__(self, recorder: Recorder) -> None:
        self.rec = recorder
        self.turn: Turn | None = None
        self.step = 0
        self.kinds: Counter[str] = Counter()

    def begin(self, turn: Turn) -> None:
        self.turn, self.step = turn, 0
        self.rec.begin(turn)

    def request_body(self, prompt: Prompt, model: str | None = None) -> dict:
        return {"model": model or self.model, "messages": len(prompt.messages)}

    async def stream(self, prompt: Prompt, model: str | None = None):
        assert self.turn is not None
        kind = classify(prompt)
        self.kinds[kind] += 1
        self.rec.on_request(kind, self.step, prompt)
        calls: list[sim_script.Call] = []
        if kind in ("summary", "other-summary"):
            text = sim_script.GENERIC_SUMMARY
        elif kind == "boundary":
            text = sim_script.BOUNDARY_REPLY
        elif kind == "rebuild":
            text = sim_script.STATE_TEMPLATE.format(n=self.turn.n)
        elif self.step < len(self.turn.steps):
            calls = self.turn.steps[self.step]
            text = sim_script.step_text(self.turn.n, self.step)
            self.step += 1
        else:
            text = sim_script.answer_text(self.turn.n)
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
        return [MODEL]

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

    def main(self) -> list[Request]:
        return [r for r in self.requests if r.kind == "main"]

    def extra(self) -> list[Request]:
        return [r for r in self.requests if r.kind != "main"]


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


async def run_policy(
    policy: Policy, plan: Plan, project: Path, tmp: Path, sample: int, progress: bool
) -> Result:
    work = tmp / policy.name
    work.mkdir()
    cfg = make_config(policy, project, work / "slop.db", tmp / "xdg")
    ws = await Workspace.open(cfg, env={})
    rec = Recorder(plan)
    provider = SimProvider(rec)
    orch = Orchestrator(ws, approve="all", provider_factory=lambda _cfg: provider)
    if policy.window is not None:
        await ws.ledger.ensure_session(ws.session)
        await ws.ledger.set_window(ws.session, policy.window)
    events: Counter[str] = Counter()
    errors: list[str] = []
    originals: dict[int, str] = {}
    tool_sizes: list[int] = []
    limbo: list[int] = []
    gids: dict[int, int] = {}
    t0 = time.perf_counter()
    try:
        for turn in plan.turns:
            provider.begin(turn)
            outcome = await orch.run_turn(turn.text)
            await orch.wait_background()  # after-reply compaction, lane summary
            await settle()
            # Background events land in the same outcome, so read them after the wait.
            for e in outcome.events:
                if e.kind == "compaction":
                    events[f"compaction:{e.phase}:{e.case or '-'}"] += 1
                events[e.kind] += 1
                if e.kind == "tool_result":
                    originals[e.message_id] = e.text
                    tool_sizes.append(len(e.text.encode()))
                elif e.kind == "error":
                    errors.append(f"turn {turn.n}: {e.message}")
                elif e.kind == "notice" and len(errors) < 50 and "rejected" in e.text:
                    errors.append(f"turn {turn.n}: {e.text}")
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


def _targets(results: list[Result], full_cum: int) -> list[str]:
    """The `targets:` block (`  what: value  PASS|FAIL`) that bench/run_all.py collects."""
    r = next((r for r in results if r.policy.name == "default"), None)
    if r is None or not full_cum:
        return []
    main, extra = r.main(), r.extra()
    share = (sum(q.tokens for q in main) + sum(q.tokens for q in extra)) * 100 / full_cum
    peak = max((q.tokens for q in main + extra), default=0) * 100 / r.policy.context_window
    kept = sum(1 for v in r.survival.values() if v["kept"])
    asked = len(r.survival)
    checked = sum(v["checked"] for v in r.recover.values())
    ok = sum(v["ok"] for v in r.recover.values())

    def row(what: str, value: str, passed: bool) -> str:
        return f"  {what}: {value}  {'PASS' if passed else 'FAIL'}"

    return [
        "targets:",
        row("cumulative tokens <= 10 % of full history", f"{share:.1f} %", share <= 10),
        row("peak request <= 60 % of the window", f"{peak:.1f} %", peak <= 60),
        row(
            "anchor survival >= 95 %",
            f"{kept}/{asked} = {kept * 100 / max(1, asked):.1f} %",
            asked > 0 and kept * 100 >= 95 * asked,
        ),
        row(
            "cut or summarized messages read back identical through query_db",
            f"{ok}/{checked} checked",
            ok == checked,
        ),
    ]


def report(results: list[Result], plan: Plan) -> str:
    lines: list[str] = []
    full = next((r for r in results if r.policy.name == "full"), None)
    full_cum = sum(r.tokens for r in full.requests) if full else 0
    sizes = sorted(s for r in results[:1] for s in r.tool_sizes)
    kinds = Counter(t.kind for t in plan.turns)
    n_user = sum(1 for f in FACTS if f.source == "user")
    lines.append(
        f"Scenario: {len(plan.turns)} turns ({kinds['tool']} with tools, {kinds['chat']} chat, "
        f"{kinds['ask']} asking), {len(FACTS)} facts ({n_user} said by the user, "
        f"{len(FACTS) - n_user} in tool outputs) planted in turns 1-{plan.plant_until}, asked "
        f"in turns {plan.ask_from}-{len(plan.turns)}."
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
    head = (
        f"{'policy':<32} {'requests':>8} {'cumulative':>11} {'vs full':>8} "
        f"{'+compact':>9} {'peak':>8} {'peak/win':>8} {'compact':>7} {'lane':>5} "
        f"{'LCP mean':>9} {'LCP tok':>8} {'anchors':>8} {'user':>6} {'tool':>6} {'time':>6}"
    )
    lines.append(head)
    lines.append("-" * len(head))
    for r in results:
        main = r.main()
        cum = sum(q.tokens for q in main)
        extra = sum(q.tokens for q in r.extra())
        allreq = main + r.extra()
        peak = max((q.tokens for q in allreq), default=0)
        lcp_share = sum(q.lcp_chars for q in main[1:]) / max(1, sum(q.chars for q in main[1:]))
        lcp_tok = sum(q.lcp_tokens for q in main[1:]) / max(1, len(main) - 1)
        kept = [f for f in FACTS if r.survival.get(f.fid, {}).get("kept")]
        asked = [f for f in FACTS if f.fid in r.survival]
        ku = sum(1 for f in kept if f.source == "user")
        kt = len(kept) - ku
        au = sum(1 for f in asked if f.source == "user")
        at = len(asked) - au
        lanes = r.summary_kinds.get("lane", 0)
        compactions = sum(n for k, n in r.summary_kinds.items() if k != "lane")
        vs = f"{(cum + extra) * 100 / full_cum:.1f} %" if full_cum else "-"
        win = r.policy.context_window
        pw = f"{peak * 100 / win:.1f} %" if win < 10**7 else "-"
        lines.append(
            f"{r.policy.label:<32} {len(allreq):>8} {_k(cum + extra):>11} {vs:>8} "
            f"{_k(extra):>9} {_k(peak):>8} {pw:>8} {compactions:>7} {lanes:>5} "
            f"{lcp_share * 100:>8.1f}% {_k(lcp_tok):>8} "
            f"{len(kept):>3}/{len(asked):<3} {ku:>2}/{au:<3} {kt:>2}/{at:<3} {r.seconds:>5.0f}s"
        )
    lines.append("")
    lines.append(
        "cumulative: every request's tokens summed (session requests + compaction "
        "requests); +compact: the compaction requests alone (summary, topic boundary)."
    )
    lines.append("peak: the largest request; peak/win: of the 128,000-token context window.")
    lines.append(
        "compact: summaries by after-reply compaction or the guard ladder; lane: rolling "
        "lane summaries (rows that left the window)."
    )
    lines.append(
        "LCP: longest common prefix with the previous "
        "session request, share of the request (chars), tokens = that share of it."
    )
    lines.append("anchors: facts whose key is verbatim in the request of the turn that asks.")
    lines.append("")
    lines.append(
        "Targets (default policy): cumulative <= 10 % of full history; peak <= 60 % of "
        "the window; anchors >= 95 % (38/40); every cut or summarized message "
        "recoverable through query_db."
    )
    lines.extend(_targets(results, full_cum))
    for r in results:
        lines.append("")
        lines.append(f"## {r.policy.label}")
        where = Counter(w for s in r.survival.values() if s["kept"] for w in set(s["where"]))
        lines.append(
            "  kept by: " + (", ".join(f"{w} x{n}" for w, n in where.most_common()) or "(nothing)")
        )
        lost = [f for f in FACTS if f.fid in r.survival and not r.survival[f.fid]["kept"]]
        if lost:
            lines.append("  lost: " + ", ".join(f"{f.fid} ({f.source}, {f.kind})" for f in lost))
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
            summ = [q for q in extra if q.kind in ("summary", "other-summary")]
            share = sum(q.lcp_chars for q in summ) * 100 / max(1, sum(q.chars for q in summ))
            lines.append(
                "  compaction requests: "
                + ", ".join(f"{k} x{n}" for k, n in by_kind.items())
                + f", {_k(sum(q.tokens for q in extra))} tokens; summary requests share "
                f"{share:.1f} % of their text with the preceding session request"
            )
        if r.limbo:
            lines.append(
                f"  limbo (rows outside the window and not summarized, after each turn): "
                f"max {max(r.limbo)}, mean {sum(r.limbo) / len(r.limbo):.1f}, "
                f"last {r.limbo[-1]}"
            )
        if r.probe:
            union = {f for f, v in r.survival.items() if v["kept"]} | set(r.probe["fids"])
            lines.append(
                f"  recall probe (diagnostic, not the engine): the 5 summarized lines "
                f"sharing most keywords with the question hold the key for "
                f"{r.probe['found']}/{r.probe['asked']} facts "
                f"(about {r.probe['mean_chars'] // 4} tokens per request); with the "
                f"anchors kept: {len(union)}/{len(r.survival)}"
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
    names = args.policy or list(POLICIES)
    results = []
    with tempfile.TemporaryDirectory(prefix="slop-context-sim-") as d:
        tmp = Path(d)
        project = tmp / "project"
        write_project(plan, project)
        (tmp / "xdg").mkdir()
        for name in names:
            res = await run_policy(
                POLICIES[name], plan, project, tmp, args.sample, not args.no_progress
            )
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
        help="run only this policy (repeatable)",
    )
    ap.add_argument("--seed", type=int, default=7)
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
