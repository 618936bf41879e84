"""The scripted session bench/context_sim.py replays: facts, turns, files, the model's words.

A coding session on a made-up billing service. `build_plan(turns)` gives:

- `files`: the project the tools read (source files, test logs, config files),
  written into a temporary folder before the run; each tool call reads its
  own file, so its output has the size the plan chose (log-uniform between
  200 B and 50 KB) and is produced by a real tool (read_file, grep,
  list_directory, execute_bash);
- `turns`: one user prompt each, with the tool steps the simulated model
  takes (0-2 steps of 1-2 calls), the facts planted in it and the facts it
  asks about.

40 facts are planted in the first fifth of the session (turns 1-60 of 300),
26 in the user's own words and 14 in tool outputs, and asked about in the
last fifth (turns 240-300). Each fact has a `key`: the verbatim string an
answer needs (a port, a path, a table name, a constraint sentence). The plan
checks that every key occurs exactly where it is planted and nowhere else in
the scenario (prompts, questions, files, the model's replies), so a key found
in a request is there because the engine kept it.

The simulated model is deliberately unhelpful: its answers, `### STATE`
blocks, summaries and topic-boundary answers are generic and never repeat a
fact. What survives is what the engine itself preserves.

Pure and deterministic (a seeded `random.Random`): no slop_tui import here.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

MIN_OUTPUT = 200
MAX_OUTPUT = 50_000
N_FACTS = 40

# --- facts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    fid: str
    kind: str  # port, path, constraint, decision, identifier, version, url, number, ...
    source: str  # "user" (said in a prompt) | "tool" (in a tool output)
    key: str  # what must be in the request, verbatim
    question: str  # asked late; never contains the key
    plant: str = ""  # user facts: the sentence in the prompt
    # tool facts: the file that carries it, how it is read, and the prompt that reads it
    path: str = ""
    tool: str = ""  # read_file | execute_bash | grep | list_directory
    line: str = ""  # the line of the file that carries the key
    ask: str = ""  # the user prompt of the turn that reads the file


# fmt: off
USER_FACTS = (
    Fact("port", "port", "user", "48213",
         "Which port does the API listen on in the dev stack?",
         plant="Heads-up: in the dev stack the API listens on port 48213, not 8000."),
    Fact("no-edit", "constraint", "user", "never edit vendor/legacy_api.py",
         "Is there a file I told you must not be modified?",
         plant="One hard rule for this repo: never edit vendor/legacy_api.py, the partner "
               "team regenerates it."),
    Fact("table", "identifier", "user", "billing_events_v2",
         "Which table should new billing queries read from?",
         plant="Use the table `billing_events_v2` for every new query; the old events table "
               "is going away."),
    Fact("retries", "decision", "user", "retries capped at 7",
         "What did we settle on for the retry limit?",
         plant="OK, decided: retries capped at 7 with jittered backoff, no more debate."),
    Fact("releases", "path", "user", "/srv/billing/releases",
         "Where do release artifacts get copied on the build host?",
         plant="Release artifacts get copied to /srv/billing/releases on the build host."),
    Fact("python", "version", "user", "Python 3.11.9",
         "Which interpreter version is CI pinned to?",
         plant="CI is pinned to Python 3.11.9, so keep the syntax compatible with it."),
    Fact("health-url", "url", "user", "https://status.billing-internal.example.com/v2/health",
         "What was the health-check URL I gave you?",
         plant="The health check to poll after a deploy is "
               "https://status.billing-internal.example.com/v2/health by the way."),
    Fact("flag", "identifier", "user", "BILLING_LEDGER_V3_ENABLED",
         "What is the environment flag for the ledger rollout?",
         plant="The ledger rollout is behind the BILLING_LEDGER_V3_ENABLED env flag."),
    Fact("dry-run", "constraint", "user", "always run migrations with --dry-run first",
         "What did I ask you to do every time before applying a schema migration?",
         plant="Please always run migrations with --dry-run first, even locally."),
    Fact("timeout", "number", "user", "47 s",
         "What read timeout did I want for the gateway client?",
         plant="The gateway client should use a read timeout of 47 s; their p99 is around half "
               "a minute."),
    Fact("function", "identifier", "user", "reconcile_invoice_batch",
         "Which function did I say is the one that really matters for reconciliation?",
         plant="The function that really matters is reconcile_invoice_batch, everything else "
               "around it is plumbing."),
    Fact("msgspec", "decision", "user", "msgspec instead of pydantic",
         "Which serialization library did we pick for the wire models, and over what?",
         plant="Decision: we're going with msgspec instead of pydantic for the wire models."),
    Fact("deps", "constraint", "user", "don't add new dependencies to requirements/base.txt",
         "Was there a rule about adding dependencies?",
         plant="Also, don't add new dependencies to requirements/base.txt without asking me."),
    Fact("branch", "identifier", "user", "release/2024.11-hotfix",
         "Which branch should the work go on?",
         plant="Commit to release/2024.11-hotfix for now, not to main."),
    Fact("batch", "number", "user", "1750 rows",
         "What batch size does the nightly job use?",
         plant="The nightly job uses a batch size of 1750 rows."),
    Fact("owner", "identifier", "user", "@marta-okafor",
         "Who owns the payments schema, whom should I loop in?",
         plant="Marta (@marta-okafor) owns the payments schema; loop her in on changes there."),
    Fact("ticket", "identifier", "user", "BILL-4412",
         "Which ticket does this work track?",
         plant="All of this tracks ticket BILL-4412."),
    Fact("card-log", "constraint", "user", "never log full card numbers",
         "What was my security rule about logging?",
         plant="Security note: never log full card numbers, mask all but the last four digits."),
    Fact("cron", "number", "user", "17 3 * * *",
         "When does the reconciliation cron run?",
         plant="The reconciliation cron runs at `17 3 * * *` UTC."),
    Fact("stripe-path", "path", "user", "services/ledger/adapters/stripe_adapter.py",
         "Where does the Stripe adapter code live?",
         plant="The Stripe code lives in services/ledger/adapters/stripe_adapter.py."),
    Fact("idempotency", "decision", "user", "36 hours",
         "How long did we agree idempotency keys should live?",
         plant="We agreed that idempotency keys expire after 36 hours."),
    Fact("replica", "identifier", "user", "pg-billing-replica-02.internal:6432",
         "Which host should read-only queries go to?",
         plant="Read-only queries go to pg-billing-replica-02.internal:6432 through pgbouncer."),
    Fact("money", "constraint", "user", "do not use float for money",
         "What did I say about how to represent money amounts?",
         plant="And do not use float for money anywhere; Decimal or integer cents only."),
    Fact("slo", "number", "user", "180 ms",
         "What is the latency objective for the charges endpoint?",
         plant="The objective for the charges endpoint is p95 under 180 ms."),
    Fact("sandbox", "decision", "user", "acct_sbx_5521",
         "Which sandbox account did we agree to test against?",
         plant="Let's test against the sandbox account acct_sbx_5521 only, never a live one."),
    Fact("freeze", "decision", "user", "2024-11-22",
         "When does the code freeze start?",
         plant="Keep in mind the code freeze starts on 2024-11-22."),
)

TOOL_FACTS = (
    Fact("redis", "url", "tool", "redis://cache-7.billing.internal:6390/4",
         "What Redis URL is configured in the settings file?",
         path="config/settings.toml", tool="read_file",
         line='redis_url = "redis://cache-7.billing.internal:6390/4"',
         ask="Read config/settings.toml and tell me whether the cache settings look sane."),
    Fact("concurrency", "number", "tool", "WORKER_CONCURRENCY=12",
         "What worker concurrency is set in the compose file?",
         path="deploy/docker-compose.yml", tool="read_file",
         line="      - WORKER_CONCURRENCY=12",
         ask="Have a look at deploy/docker-compose.yml, is the worker service configured right?"),
    Fact("failing-test", "identifier", "tool", "test_partial_refund_rounding",
         "Which refund test was failing early in the session?",
         path="logs/refund_tests.log", tool="execute_bash",
         line="FAILED tests/test_refunds.py::test_partial_refund_rounding - "
              "AssertionError: assert 1999 == 2000",
         ask="Run the refund tests (the output is in logs/refund_tests.log) and tell me what "
             "is broken."),
    Fact("commit", "identifier", "tool", "a3f9c2e",
         "Which commit introduced the ledger split?",
         path="logs/gitlog.txt", tool="execute_bash",
         line="a3f9c2e split ledger entries into debit and credit rows",
         ask="Show me the recent git history (logs/gitlog.txt has it) so we can find where the "
             "ledger change came in."),
    Fact("migration", "identifier", "tool", "0047_split_ledger_entries",
         "What is the migration id for the ledger split?",
         path="migrations/versions", tool="list_directory",
         line="0047_split_ledger_entries.py",
         ask="List migrations/versions, I want to see which migrations exist."),
    Fact("webhook-tol", "number", "tool", "STRIPE_WEBHOOK_TOLERANCE=300",
         "What webhook tolerance is set in the example env file?",
         path="config/env.example", tool="read_file",
         line="STRIPE_WEBHOOK_TOLERANCE=300",
         ask="Read config/env.example and check nothing secret is committed in it."),
    Fact("void-error", "error", "tool", "InvoiceStateError: cannot void a settled invoice",
         "What error did the void endpoint raise in the log?",
         path="logs/void_endpoint.log", tool="execute_bash",
         line="billing.errors.InvoiceStateError: cannot void a settled invoice",
         ask="The void endpoint fails in staging; look at logs/void_endpoint.log."),
    Fact("line-items", "number", "tool", "MAX_LINE_ITEMS = 250",
         "What is the maximum number of line items per invoice in the code?",
         path="services/invoices/limits.py", tool="grep",
         line="MAX_LINE_ITEMS = 250",
         ask="Grep services/invoices/limits.py for the MAX_ constants, I need the limits."),
    Fact("line-length", "number", "tool", "line-length = 104",
         "What line length is ruff configured with?",
         path="pyproject.toml", tool="read_file",
         line="line-length = 104",
         ask="Read pyproject.toml and summarise the lint setup."),
    Fact("dashboard", "url", "tool", "https://grafana.billing-internal.example.com/d/7Hq2x",
         "What was the staging dashboard URL in the README?",
         path="README.md", tool="read_file",
         line="Staging dashboard: https://grafana.billing-internal.example.com/d/7Hq2x",
         ask="Read the README, is the setup section still accurate?"),
    Fact("check", "identifier", "tool", "amount_cents >= 0",
         "What check constraint is on the amount column of the charges table?",
         path="db/schema.sql", tool="read_file",
         line="    amount_cents BIGINT NOT NULL CHECK (amount_cents >= 0),",
         ask="Read db/schema.sql, I want to know how charges are stored."),
    Fact("codeowner", "identifier", "tool", "@billing-core",
         "Which team owns the ledger service according to CODEOWNERS?",
         path=".github/CODEOWNERS", tool="read_file",
         line="/services/ledger/ @billing-core",
         ask="Who reviews what? Read .github/CODEOWNERS."),
    Fact("dlq", "identifier", "tool", "billing.events.dlq",
         "Which dead-letter queue did the worker log mention?",
         path="logs/worker.log", tool="execute_bash",
         line="WARN moving message 8812 to billing.events.dlq after max deliveries",
         ask="The worker keeps restarting; check the tail of logs/worker.log."),
    Fact("memory", "number", "tool", "768Mi",
         "What memory limit does the API deployment set?",
         path="deploy/k8s/api.yaml", tool="read_file",
         line="            memory: 768Mi",
         ask="Read deploy/k8s/api.yaml and check the resource limits."),
)

# fmt: on

FACTS = USER_FACTS + TOOL_FACTS
assert len(FACTS) == N_FACTS and len({f.fid for f in FACTS}) == N_FACTS

# --- the model's words: generic on purpose -------------------------------------------------

ANSWERS = (
    "Done. I went through what you asked and the change is in place; nothing else needs "
    "attention right now.",
    "I looked at it. The code does what it says, with one or two spots that could be tidier, "
    "but nothing that blocks the next step.",
    "That makes sense. I would keep the current structure and revisit it once the tests are "
    "green again.",
    "I checked the output. Most of it is routine; the part that matters is handled the way "
    "the rest of the module handles it.",
    "Here is my take: the simplest option is fine for now, and it keeps the change small and "
    "easy to review.",
    "I don't have that detail in front of me any more; could you remind me, or should I look "
    "it up?",
)
STEP_TEXTS = ("", "Let me look.", "", "Checking that now.")

STATE_TEMPLATE = (
    "### STATE\n"
    "Goal: keep going with the user's current request\n"
    "Context: a coding session on this repository\n"
    "Resolved: step {n} finished\n"
    "Technical Anchors: (none recorded)\n"
)

GENERIC_SUMMARY = """<analysis>Going through the conversation to write the summary.</analysis>
<summary>
## User Intent
- The user is working through a series of coding tasks on this repository.
## Technical Context
- A Python service with a test suite; the usual tools were used.
## Files & Code
- Several source files were read and discussed.
## Errors & Fixes
- Some test failures were investigated.
## Key Decisions
- A few choices were made along the way.
## Pending Tasks
- Continue with the user's next request.
## Current State
- Work is in progress.
</summary>"""

BOUNDARY_REPLY = json.dumps(
    {
        "boundary_index": None,
        "boundary_reason": "same topic",
        "confidence": 0.2,
        "summary": "Earlier work on the repository.",
    }
)


def answer_text(n: int) -> str:
    return ANSWERS[n % len(ANSWERS)] + "\n\n" + STATE_TEMPLATE.format(n=n)


def step_text(n: int, step: int) -> str:
    return STEP_TEXTS[(n + step) % len(STEP_TEXTS)]


# --- plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    name: str
    args: dict
    target: int  # planned output size in bytes (the real output differs a little)


@dataclass
class Turn:
    n: int  # 1-based
    text: str
    steps: list[list[Call]] = field(default_factory=list)
    plants: list[str] = field(default_factory=list)
    asks: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        if self.asks:
            return "ask"
        return "tool" if self.steps else "chat"


@dataclass
class Plan:
    turns: list[Turn]
    files: dict[str, str]
    plant_until: int
    ask_from: int

    def fact(self, fid: str) -> Fact:
        return next(f for f in FACTS if f.fid == fid)


# fmt: off
_NOUNS = (
    "invoice", "charge", "refund", "payout", "account", "balance", "webhook", "customer",
    "currency", "settlement", "dispute", "tax", "line_item", "subscription", "plan", "coupon",
    "receipt", "statement", "audit", "ledger_entry", "transfer", "fee", "credit_note", "mandate",
)
_VERBS = (
    "load", "save", "apply", "compute", "validate", "normalize", "fetch", "merge", "split",
    "emit", "record", "resolve", "render", "parse", "schedule", "cancel", "retry", "sync",
)
_PKGS = ("billing", "ledger", "invoices", "payments", "webhooks", "reports", "common", "jobs")
_SUITES = ("unit", "integration", "api", "jobs", "webhooks", "ledger", "reports")
# fmt: on


def _log_uniform(rnd: random.Random, lo: int = MIN_OUTPUT, hi: int = MAX_OUTPUT) -> int:
    return int(math.exp(rnd.uniform(math.log(lo), math.log(hi))))


def _func(rnd: random.Random) -> str:
    return f"{rnd.choice(_VERBS)}_{rnd.choice(_NOUNS)}"


def python_source(rnd: random.Random, size: int, module: str) -> str:
    out = [
        f'"""{module}: helpers for the {rnd.choice(_NOUNS)} flow."""\n',
        "from __future__ import annotations\n",
        "import logging\n",
        "from decimal import Decimal\n",
        "\nlog = logging.getLogger(__name__)\n",
    ]
    n = sum(len(s) for s in out)
    while n < size:
        f, noun = _func(rnd), rnd.choice(_NOUNS)
        k = rnd.randint(2, 9)
        body = [
            f"\n\ndef {f}({noun}, ctx=None):\n",
            f'    """{f.replace("_", " ").capitalize()} for the current batch."""\n',
            f"    if {noun} is None:\n",
            f'        raise ValueError("{noun} is required")\n',
            "    total = Decimal(0)\n",
            f"    for item in {noun}.items[:{k * 10}]:\n",
            "        total += item.amount\n",
            f"        log.debug('{f}: %s', item.id)\n",
            f"    return total  # checked in test_{f}\n",
        ]
        out.extend(body)
        n += sum(len(s) for s in body)
    return "".join(out)[:size].rsplit("\n", 1)[0] + "\n"


def test_log(rnd: random.Random, size: int, suite: str, extra: str = "") -> str:
    out = [f"============ test session starts ============\nplatform linux -- suite {suite}\n"]
    n, count, failed = len(out[0]), 0, 0
    while n < size:
        count += 1
        ok = rnd.random() > 0.04
        failed += not ok
        line = (
            f"tests/{suite}/test_{rnd.choice(_NOUNS)}.py::test_{_func(rnd)}_{count} "
            f"{'PASSED' if ok else 'FAILED'}\n"
        )
        out.append(line)
        n += len(line)
    if extra:
        out.insert(len(out) // 2, extra + "\n")
    out.append(f"============ {count - failed} passed, {failed} failed ============\n")
    return "".join(out)


def app_log(rnd: random.Random, size: int, extra: str = "") -> str:
    out, n, t = [], 0, 0
    while n < size:
        t += rnd.randint(1, 40)
        level = rnd.choice(("INFO", "INFO", "INFO", "DEBUG", "WARN"))
        line = (
            f"12:{(t // 60) % 60:02d}:{t % 60:02d} {level} {rnd.choice(_PKGS)}."
            f"{rnd.choice(_NOUNS)} {_func(rnd)} id={rnd.randint(100, 999)} "
            f"took={rnd.randint(1, 99)}\n"
        )
        out.append(line)
        n += len(line)
    if extra:
        out.insert(max(0, len(out) - 3), extra + "\n")
    return "".join(out)


def config_file(rnd: random.Random, size: int, comment: str, line: str) -> str:
    out = [f"{comment} generated for the billing service\n"]
    n = len(out[0])
    i = 0
    while n < size:
        i += 1
        key = f"{rnd.choice(_NOUNS)}_{rnd.choice(('limit', 'enabled', 'mode', 'name', 'level'))}"
        val = rnd.choice(
            ('"on"', '"off"', "true", "false", str(rnd.randint(1, 99)), f'"{rnd.choice(_NOUNS)}"')
        )
        s = f"{key}{i} = {val}\n"
        out.append(s)
        n += len(s)
    out.insert(len(out) // 2, line + "\n")
    return "".join(out)


def _user_prompt(rnd: random.Random, kind: str, target: str = "") -> str:
    f, noun = _func(rnd), rnd.choice(_NOUNS)
    suite = rnd.choice(_SUITES)
    if kind == "read":
        text = rnd.choice(
            (
                f"Open {target} and explain how {f} handles an empty batch.",
                f"Read {target}; I think {f} double counts {noun} amounts. Can you confirm?",
                f"Look at {target} and tell me which functions touch {noun}.",
                f"Can you check {target}? Something in there breaks the {suite} suite.",
            )
        )
    elif kind == "log":
        text = rnd.choice(
            (
                f"Run the {suite} tests (output goes to {target}) and tell me what fails.",
                f"Show me {target}, the {suite} job was flaky last night.",
                f"What does {target} say about the {noun} step?",
            )
        )
    elif kind == "grep":
        text = rnd.choice(
            (
                f"Grep {target} for {noun} and list the call sites.",
                f"Where is {noun} used in {target}?",
            )
        )
    elif kind == "list":
        text = rnd.choice(
            (
                f"What's in {target}? I need to find where the {noun} logic lives.",
                f"List {target} for me.",
            )
        )
    else:  # chat
        other = rnd.choice(_NOUNS)
        text = rnd.choice(
            (
                f"Should {f} return cents or a Money object? Think about the callers in {suite}.",
                f"Write a short plan for splitting the {noun} module into two.",
                f"Explain the difference between {noun} and {other} handling in this codebase.",
                f"Is it worth adding a cache in front of {f}?",
                f"Let's rename {f} to something clearer. Suggestions?",
                f"What would a good test for {f} look like?",
                f"Summarise where we are with the {noun} work.",
            )
        )
    if rnd.random() < 0.12:  # sometimes the user pastes something
        text += (
            "\n\nHere is what I see locally:\n```\n" + app_log(rnd, rnd.randint(400, 2500)) + "```"
        )
    return text


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.files: dict[str, str] = {}
        self.k = 0

    def call_for(self, size: int) -> tuple[Call, str, str]:
        """A real tool call whose output is about `size` bytes; (call, prompt kind, target)."""
        rnd = self.rnd
        self.k += 1
        k = self.k
        pkg = rnd.choice(_PKGS)
        if size < 1500 and rnd.random() < 0.5:
            d = f"src/{pkg}/m{k:03d}"
            entries = max(2, size // 28)
            for i in range(entries):
                self.files[f"{d}/{rnd.choice(_VERBS)}_{rnd.choice(_NOUNS)}_{i}.py"] = "x = 1\n"
            return Call("list_directory", {"path": d}, size), "list", d
        if size < 12_000 and rnd.random() < 0.35:
            path = f"src/{pkg}/grep_{k:03d}.py"
            noun = rnd.choice(_NOUNS)
            lines, n = [], 0
            while n < size:
                s = f"    {noun}_total += {noun}.amount  # {_func(rnd)} {rnd.randint(1, 999)}\n"
                lines.append(s)
                lines.append(f"    {_func(rnd)}(ctx)\n")
                n += len(s) + len(path) + 4
            self.files[path] = "def run(ctx):\n" + "".join(lines)
            return Call("grep", {"pattern": f"{noun}_total", "path": path}, size), "grep", path
        if rnd.random() < 0.55:
            path = f"src/{pkg}/mod_{k:03d}.py"
            # read_file numbers the lines (`n: `), about 15 % on top of the file
            self.files[path] = python_source(rnd, int(size / 1.15), f"{pkg}.mod_{k:03d}")
            return Call("read_file", {"path": path}, size), "read", path
        path = f"logs/{rnd.choice(_SUITES)}_{k:03d}.log"
        body = (
            test_log(rnd, size, rnd.choice(_SUITES)) if rnd.random() < 0.6 else app_log(rnd, size)
        )
        self.files[path] = body
        return Call("execute_bash", {"command": f"cat {path}"}, size), "log", path

    def tool_fact_call(self, fact: Fact) -> Call:
        rnd = self.rnd
        size = _log_uniform(rnd, 600, 9000)
        if fact.tool == "list_directory":
            for i in range(30):
                self.files[f"{fact.path}/{i:04d}_{_func(rnd)}.py"] = "x = 1\n"
            self.files[f"{fact.path}/{fact.line}"] = "x = 1\n"
            return Call("list_directory", {"path": fact.path}, size)
        if fact.path.startswith("logs/"):
            if "tests" in fact.ask:
                body = test_log(rnd, size, "refunds", fact.line)
            elif "git" in fact.ask:
                lines = [
                    f"{rnd.getrandbits(28):07x} {_func(rnd).replace('_', ' ')}"
                    for _ in range(size // 40)
                ]
                lines.insert(len(lines) // 3, fact.line)
                body = "\n".join(lines) + "\n"
            else:
                body = app_log(rnd, size, fact.line)
            self.files[fact.path] = body
            cmd = f"tail -n 400 {fact.path}" if "tail" in fact.ask else f"cat {fact.path}"
            return Call("execute_bash", {"command": cmd}, size)
        if fact.tool == "grep":
            body = python_source(rnd, size, "invoices.limits")
            consts = "".join(f"MAX_{n.upper()}S = {rnd.randint(2, 99)}\n" for n in _NOUNS[:8])
            self.files[fact.path] = consts + fact.line + "\n" + body
            return Call("grep", {"pattern": "MAX_", "path": fact.path}, size)
        comment = "--" if fact.path.endswith(".sql") else "#"
        self.files[fact.path] = config_file(rnd, size, comment, fact.line)
        return Call("read_file", {"path": fact.path}, size)

    def work_steps(self) -> tuple[list[list[Call]], str, str]:
        rnd = self.rnd
        steps = [[] for _ in range(2 if rnd.random() < 0.3 else 1)]
        first_kind, first_target = "", ""
        for step in steps:
            for _ in range(1 if rnd.random() < 0.65 else 2):
                call, kind, target = self.call_for(_log_uniform(rnd))
                step.append(call)
                if not first_kind:
                    first_kind, first_target = kind, target
        return steps, first_kind, first_target


def build_plan(turns: int = 300, seed: int = 7, ask_from: int | None = None) -> Plan:
    """The scripted session: facts planted in turns 1..turns/5, asked from `ask_from` on."""
    if turns < 10:
        raise ValueError("need at least 10 turns")
    b = _Builder(seed)
    rnd = b.rnd
    plant_until = max(1, round(turns * 0.2))
    ask_from = ask_from if ask_from is not None else round(turns * 0.8)
    if not plant_until < ask_from <= turns:
        raise ValueError(f"asks must start after the planting turns (1..{plant_until})")
    facts = list(FACTS)
    rnd.shuffle(facts)
    plants: dict[int, list[Fact]] = {}
    for i, f in enumerate(facts):
        plants.setdefault(1 + i * plant_until // N_FACTS, []).append(f)
    ask_order = list(FACTS)
    rnd.shuffle(ask_order)
    span = turns - ask_from + 1
    asks: dict[int, list[Fact]] = {}
    for i, f in enumerate(ask_order):
        asks.setdefault(ask_from + i * span // N_FACTS, []).append(f)

    out: list[Turn] = []
    for n in range(1, turns + 1):
        if n in asks:
            qs = asks[n]
            text = " ".join(
                (["Quick check before we go on."] if len(qs) == 1 else ["A few quick checks."])
                + [f.question for f in qs]
                + ["Answer from what we discussed earlier."]
            )
            out.append(Turn(n, text, asks=[f.fid for f in qs]))
            continue
        planted = plants.get(n, [])
        user_facts = [f for f in planted if f.source == "user"]
        tool_facts = [f for f in planted if f.source == "tool"]
        if tool_facts:
            steps = [[b.tool_fact_call(f) for f in tool_facts]]
            text = " ".join(f.ask for f in tool_facts)
        elif rnd.random() < 0.25:
            steps, text = [], _user_prompt(rnd, "chat")
        else:
            steps, kind, target = b.work_steps()
            text = _user_prompt(rnd, kind, target)
        if user_facts:
            text = " ".join(f.plant for f in user_facts) + "\n\n" + text
        out.append(Turn(n, text, steps, plants=[f.fid for f in planted]))
    plan = Plan(out, b.files, plant_until, ask_from)
    check_plan(plan)
    return plan


def model_texts(turns: int) -> list[str]:
    """Everything the simulated model may say."""
    texts = [answer_text(n) for n in range(turns + 2)]
    texts += [step_text(n, s) for n in range(len(STEP_TEXTS)) for s in range(3)]
    return texts + [GENERIC_SUMMARY, BOUNDARY_REPLY]


def check_plan(plan: Plan) -> None:
    """Every key occurs exactly once in the scenario, where it is planted."""
    for f in FACTS:
        if f.key in f.question:
            raise AssertionError(f"fact {f.fid}: the question contains the key")
        if f.source == "user" and f.key not in f.plant:
            raise AssertionError(f"fact {f.fid}: the plant sentence lacks the key")
        if f.source == "tool" and f.key not in f.line:
            raise AssertionError(f"fact {f.fid}: the planted line lacks the key")
    texts = [t.text for t in plan.turns] + list(plan.files.values()) + list(plan.files)
    texts += [json.dumps(c.args) for t in plan.turns for s in t.steps for c in s]
    texts += model_texts(len(plan.turns))
    for f in FACTS:
        hits = sum(t.count(f.key) for t in texts)
        if hits != 1:
            raise AssertionError(f"fact {f.fid}: key {f.key!r} occurs {hits} times in the scenario")
