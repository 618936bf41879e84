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

53 facts, asked about in the last fifth (turns 240-300 of 300). 40 are planted
in the first fifth (turns 1-60), 26 in the user's own words and 14 in tool
outputs; 9 are harder (`HARD_FACTS`), planted where their `plant_at` says:
a constraint at the end of a sentence of 270 characters and a value at the
end of another long one, softly worded constraints ("Please avoid
force-pushing to main. Prefer rebase."), a fact only in a 45 KB log, a fact
the model's STATE repeats for a while and then drops, a value stated early
and corrected half-way (`superseded`: the earlier value must not be presented
as current), and a fact planted late, when the summary's anchor list is full;
4 more (`ENGINE_FACTS`) in the middle of the session: a value that moves ("the
release moved to March 17"), a softly worded rule ("I would rather you did not
touch the CI config."), a value stated once in the middle of a long message,
and a rule given only in a tool result (a contributing guide read with
read_file).

Each fact has a `key`: the verbatim string an answer needs, and `subjects`:
the phrases that say what it is about. `Fact.metric()` is the fact as
bench/answerable.py measures it: answerable when a request holds a subject
and the key in one line or bullet (or the planted sentence). The plan checks
that every key occurs exactly where it is planted and nowhere else in the
scenario (prompts, questions, files, the model's replies, STATE included),
except where the script says so (the STATE that repeats one fact, and only
before that fact is asked), so a key found in a request is there because the
engine kept it.

Every path of the engine runs in scripted phases (`Turn.phase`): `plant`,
`work` and `ask` are the ordinary session; a stress block at 40 % of the
session adds `tool-storm` (a 78k-token paste, then a tool loop of 40 reads
that crosses 90 % of the input budget: tiers and elision), `topic` (a topic
change the detector model finds: boundary, then truncate), `overflow` (two
50k-token pastes in a row: the emergency truncation), `guard` (two such
pastes with a tool turn between them: the guard ladder's own summary of the
older one) and `files` (three 40k-token files put into the context with
`/file add`: shed, then removed).

The simulated model is deliberately unhelpful: its answers, `### STATE`
blocks, summaries and topic-boundary answers are generic and never repeat a
fact (the one STATE exception above is the script's, and it ends before the
fact is asked). Its topic detector is right (it names the turn where the
script changes the topic); its summaries are empty of facts. What survives
is what the engine itself preserves.

Pure and deterministic (a seeded `random.Random`): no slop_tui import here.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass, field

import answerable

MIN_OUTPUT = 200
MAX_OUTPUT = 50_000

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
    subjects: tuple[str, ...] = ()  # what the key is about (bench/answerable.py)
    superseded: tuple[str, ...] = ()  # earlier values, stated by `earlier`
    earlier: str = ""  # the sentence with the earlier value (planted with the first facts)
    plant_at: float = 0.0  # where it is planted, a share of the session (0: the first fifth)
    state_turns: int = 0  # the model's STATE repeats the plant this many turns, then drops it
    size: int = 0  # tool facts: the output size in bytes (0: 600-9,000 B)

    @property
    def sentence(self) -> str:
        """The sentence (user facts) or line (tool facts) that carries the key."""
        if self.source == "tool":
            return self.line.strip()
        pieces = [p for p in _SENTENCE_END.split(self.plant) if self.key in p]
        return pieces[-1] if pieces else self.plant

    def metric(self) -> answerable.Fact:
        """The fact as bench/answerable.py checks it."""
        return answerable.Fact(self.fid, self.key, self.subjects, self.sentence, self.superseded)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# fmt: off
USER_FACTS = (
    Fact("port", "port", "user", "48213",
         "Which port does the API listen on in the dev stack?",
         plant="Heads-up: in the dev stack the API listens on port 48213, not 8000.",
         subjects=("API",)),
    Fact("no-edit", "constraint", "user", "never edit vendor/legacy_api.py",
         "Is there a file I told you must not be modified?",
         plant="One hard rule for this repo: never edit vendor/legacy_api.py, the partner "
               "team regenerates it.",
         subjects=("legacy_api",)),
    Fact("table", "identifier", "user", "billing_events_v2",
         "Which table should new billing queries read from?",
         plant="Use the table `billing_events_v2` for every new query; the old events table "
               "is going away.",
         subjects=("table",)),
    Fact("retries", "decision", "user", "retries capped at 7",
         "What did we settle on for the retry limit?",
         plant="OK, decided: retries capped at 7 with jittered backoff, no more debate.",
         subjects=("retries",)),
    Fact("releases", "path", "user", "/srv/billing/releases",
         "Where do release artifacts get copied on the build host?",
         plant="Release artifacts get copied to /srv/billing/releases on the build host.",
         subjects=("release artifacts",)),
    Fact("python", "version", "user", "Python 3.11.9",
         "Which interpreter version is CI pinned to?",
         plant="CI is pinned to Python 3.11.9, so keep the syntax compatible with it.",
         subjects=("CI",)),
    Fact("health-url", "url", "user", "https://status.billing-internal.example.com/v2/health",
         "What was the health-check URL I gave you?",
         plant="The health check to poll after a deploy is "
               "https://status.billing-internal.example.com/v2/health by the way.",
         subjects=("health check",)),
    Fact("flag", "identifier", "user", "BILLING_LEDGER_V3_ENABLED",
         "What is the environment flag for the ledger rollout?",
         plant="The ledger rollout is behind the BILLING_LEDGER_V3_ENABLED env flag.",
         subjects=("ledger rollout",)),
    Fact("dry-run", "constraint", "user", "always run migrations with --dry-run first",
         "What did I ask you to do every time before applying a schema migration?",
         plant="Please always run migrations with --dry-run first, even locally.",
         subjects=("migrations",)),
    Fact("timeout", "number", "user", "47 s",
         "What read timeout did I want for the gateway client?",
         plant="The gateway client should use a read timeout of 47 s; their p99 is around half "
               "a minute.",
         subjects=("read timeout",)),
    Fact("function", "identifier", "user", "reconcile_invoice_batch",
         "Which function did I say is the one that really matters for reconciliation?",
         plant="The function that really matters is reconcile_invoice_batch, everything else "
               "around it is plumbing.",
         subjects=("really matters",)),
    Fact("msgspec", "decision", "user", "msgspec instead of pydantic",
         "Which serialization library did we pick for the wire models, and over what?",
         plant="Decision: we're going with msgspec instead of pydantic for the wire models.",
         subjects=("wire models",)),
    Fact("deps", "constraint", "user", "don't add new dependencies to requirements/base.txt",
         "Was there a rule about adding dependencies?",
         plant="Also, don't add new dependencies to requirements/base.txt without asking me.",
         subjects=("dependencies",)),
    Fact("branch", "identifier", "user", "release/2024.11-hotfix",
         "Which branch should the work go on?",
         plant="Commit to release/2024.11-hotfix for now, not to main.",
         subjects=("commit to", "branch")),
    Fact("batch", "number", "user", "1750 rows",
         "What batch size does the nightly job use?",
         plant="The nightly job uses a batch size of 1750 rows.",
         subjects=("batch size",)),
    Fact("owner", "identifier", "user", "@marta-okafor",
         "Who owns the payments schema, whom should I loop in?",
         plant="Marta (@marta-okafor) owns the payments schema; loop her in on changes there.",
         subjects=("payments schema",)),
    Fact("ticket", "identifier", "user", "BILL-4412",
         "Which ticket does this work track?",
         plant="All of this tracks ticket BILL-4412.",
         subjects=("ticket",)),
    Fact("card-log", "constraint", "user", "never log full card numbers",
         "What was my security rule about logging?",
         plant="Security note: never log full card numbers, mask all but the last four digits.",
         subjects=("card numbers",)),
    Fact("cron", "number", "user", "17 3 * * *",
         "When does the reconciliation cron run?",
         plant="The reconciliation cron runs at `17 3 * * *` UTC.",
         subjects=("reconciliation cron",)),
    Fact("stripe-path", "path", "user", "services/ledger/adapters/stripe_adapter.py",
         "Where does the Stripe adapter code live?",
         plant="The Stripe code lives in services/ledger/adapters/stripe_adapter.py.",
         subjects=("Stripe",)),
    Fact("idempotency", "decision", "user", "36 hours",
         "How long did we agree idempotency keys should live?",
         plant="We agreed that idempotency keys expire after 36 hours.",
         subjects=("idempotency keys",)),
    Fact("replica", "identifier", "user", "pg-billing-replica-02.internal:6432",
         "Which host should read-only queries go to?",
         plant="Read-only queries go to pg-billing-replica-02.internal:6432 through pgbouncer.",
         subjects=("read-only queries",)),
    Fact("money", "constraint", "user", "do not use float for money",
         "What did I say about how to represent money amounts?",
         plant="And do not use float for money anywhere; Decimal or integer cents only.",
         subjects=("money",)),
    Fact("slo", "number", "user", "180 ms",
         "What is the latency objective for the charges endpoint?",
         plant="The objective for the charges endpoint is p95 under 180 ms.",
         subjects=("charges endpoint",)),
    Fact("sandbox", "decision", "user", "acct_sbx_5521",
         "Which sandbox account did we agree to test against?",
         plant="Let's test against the sandbox account acct_sbx_5521 only, never a live one.",
         subjects=("sandbox account",)),
    Fact("freeze", "decision", "user", "2024-11-22",
         "When does the code freeze start?",
         plant="Keep in mind the code freeze starts on 2024-11-22.",
         subjects=("code freeze",)),
)

TOOL_FACTS = (
    Fact("redis", "url", "tool", "redis://cache-7.billing.internal:6390/4",
         "What Redis URL is configured in the settings file?",
         path="config/settings.toml", tool="read_file",
         line='redis_url = "redis://cache-7.billing.internal:6390/4"',
         ask="Read config/settings.toml and tell me whether the cache settings look sane.",
         subjects=("redis_url",)),
    Fact("concurrency", "number", "tool", "WORKER_CONCURRENCY=12",
         "What worker concurrency is set in the compose file?",
         path="deploy/docker-compose.yml", tool="read_file",
         line="      - WORKER_CONCURRENCY=12",
         ask="Have a look at deploy/docker-compose.yml, is the worker service configured right?",
         subjects=("WORKER_CONCURRENCY",)),
    Fact("failing-test", "identifier", "tool", "test_partial_refund_rounding",
         "Which refund test was failing early in the session?",
         path="logs/refund_tests.log", tool="execute_bash",
         line="FAILED tests/test_refunds.py::test_partial_refund_rounding - "
              "AssertionError: assert 1999 == 2000",
         ask="Run the refund tests (the output is in logs/refund_tests.log) and tell me what "
             "is broken.",
         subjects=("FAILED",)),
    Fact("commit", "identifier", "tool", "a3f9c2e",
         "Which commit introduced the ledger split?",
         path="logs/gitlog.txt", tool="execute_bash",
         line="a3f9c2e split ledger entries into debit and credit rows",
         ask="Show me the recent git history (logs/gitlog.txt has it) so we can find where the "
             "ledger change came in.",
         subjects=("split ledger entries",)),
    Fact("migration", "identifier", "tool", "0047_split_ledger_entries",
         "What is the migration id for the ledger split?",
         path="migrations/versions", tool="list_directory",
         line="0047_split_ledger_entries.py",
         ask="List migrations/versions, I want to see which migrations exist.",
         subjects=("split_ledger_entries",)),
    Fact("webhook-tol", "number", "tool", "STRIPE_WEBHOOK_TOLERANCE=300",
         "What webhook tolerance is set in the example env file?",
         path="config/env.example", tool="read_file",
         line="STRIPE_WEBHOOK_TOLERANCE=300",
         ask="Read config/env.example and check nothing secret is committed in it.",
         subjects=("WEBHOOK_TOLERANCE",)),
    Fact("void-error", "error", "tool", "InvoiceStateError: cannot void a settled invoice",
         "What error did the void endpoint raise in the log?",
         path="logs/void_endpoint.log", tool="execute_bash",
         line="billing.errors.InvoiceStateError: cannot void a settled invoice",
         ask="The void endpoint fails in staging; look at logs/void_endpoint.log.",
         subjects=("cannot void",)),
    Fact("line-items", "number", "tool", "MAX_LINE_ITEMS = 250",
         "What is the maximum number of line items per invoice in the code?",
         path="services/invoices/limits.py", tool="grep",
         line="MAX_LINE_ITEMS = 250",
         ask="Grep services/invoices/limits.py for the MAX_ constants, I need the limits.",
         subjects=("MAX_LINE_ITEMS",)),
    Fact("line-length", "number", "tool", "line-length = 104",
         "What line length is ruff configured with?",
         path="pyproject.toml", tool="read_file",
         line="line-length = 104",
         ask="Read pyproject.toml and summarise the lint setup.",
         subjects=("line-length",)),
    Fact("dashboard", "url", "tool", "https://grafana.billing-internal.example.com/d/7Hq2x",
         "What was the staging dashboard URL in the README?",
         path="README.md", tool="read_file",
         line="Staging dashboard: https://grafana.billing-internal.example.com/d/7Hq2x",
         ask="Read the README, is the setup section still accurate?",
         subjects=("staging dashboard",)),
    Fact("check", "identifier", "tool", "amount_cents >= 0",
         "What check constraint is on the amount column of the charges table?",
         path="db/schema.sql", tool="read_file",
         line="    amount_cents BIGINT NOT NULL CHECK (amount_cents >= 0),",
         ask="Read db/schema.sql, I want to know how charges are stored.",
         subjects=("amount_cents",)),
    Fact("codeowner", "identifier", "tool", "@billing-core",
         "Which team owns the ledger service according to CODEOWNERS?",
         path=".github/CODEOWNERS", tool="read_file",
         line="/services/ledger/ @billing-core",
         ask="Who reviews what? Read .github/CODEOWNERS.",
         subjects=("/services/ledger/",)),
    Fact("dlq", "identifier", "tool", "billing.events.dlq",
         "Which dead-letter queue did the worker log mention?",
         path="logs/worker.log", tool="execute_bash",
         line="WARN moving message 8812 to billing.events.dlq after max deliveries",
         ask="The worker keeps restarting; check the tail of logs/worker.log.",
         subjects=("dlq",)),
    Fact("memory", "number", "tool", "768Mi",
         "What memory limit does the API deployment set?",
         path="deploy/k8s/api.yaml", tool="read_file",
         line="            memory: 768Mi",
         ask="Read deploy/k8s/api.yaml and check the resource limits.",
         subjects=("memory",)),
)

# Background the user gives before the long sentence below: no constraint or
# decision word, no value.
LONG_BACKGROUND = (
    "Some background before the next task, since you were not around for it. "
    "The billing service started as a weekend project and grew into the thing that charges "
    "every customer we have, so a lot of its corners were cut in a hurry and nobody wrote "
    "down why. The ledger code was written by three different teams over the years, each "
    "with its own idea of what a transaction is, and the tests mostly check that nothing "
    "crashes rather than that the numbers add up. Last autumn was rough: a release went out "
    "late in the week, a rounding change slipped through review, and the support queue "
    "filled up over the weekend while half the team was travelling. The people on call "
    "spent most of Saturday reading logs from three services that disagree about what time "
    "it is, and the fix itself took ten minutes once somebody found the right line. "
    "Since then the team has been careful about releases, but careful is a feeling, not a "
    "process, and feelings fade. "
)
LONG_RULE = (
    "So, after the incident review, the pager fatigue, the two rollbacks in November, the "
    "missing dashboards, the slow staging database, the noisy alerts and the long weekend "
    "everyone spent on it, here is the one thing to remember from all of this story: "
    "we never deploy on Fridays."
)

HARD_FACTS = (
    Fact("fridays", "constraint", "user", "never deploy on Fridays",
         "Is there a day of the week I said we must not ship on?",
         plant=LONG_BACKGROUND + LONG_RULE, subjects=("deploy",), plant_at=0.1),
    Fact("stg-db", "identifier", "user", "billing_stg_eu3",
         "What is the staging database called?",
         plant="While you are in there, note that the staging stack is not what the README "
               "says, because the platform team moved it twice this quarter and renamed half "
               "of the services on the way, and the staging database for all of that is "
               "billing_stg_eu3.",
         subjects=("staging database",), plant_at=0.15),
    Fact("force-push", "constraint", "user", "avoid force-pushing to main",
         "What did I say about force-pushing?",
         plant="Please avoid force-pushing to main.", subjects=("force-push",), plant_at=0.2),
    Fact("rebase", "constraint", "user", "Prefer rebase",
         "How should I bring my branch up to date, merge or rebase?",
         plant="Prefer rebase.", subjects=("rebase",), plant_at=0.2),
    Fact("pr-size", "constraint", "user", "under 400 changed lines",
         "How big may a pull request be?",
         plant="Ideally, keep each pull request under 400 changed lines.",
         subjects=("pull request",), plant_at=0.25),
    Fact("rounding", "identifier", "user", "ROUND_HALF_EVEN",
         "Which rounding mode does the FX conversion use?",
         plant="The FX conversion uses banker's rounding, ROUND_HALF_EVEN, for every currency.",
         subjects=("rounding",), plant_at=0.05, state_turns=30),
    Fact("retry-window", "number", "user", "90 minutes",
         "How long is the webhook retry window?",
         plant="Correction on the webhook retry window: it is 90 minutes now.",
         earlier="The webhook retry window is 45 minutes.",
         subjects=("retry window",), superseded=("45 minutes",), plant_at=0.55),
    Fact("oncall", "identifier", "user", "@billing-oncall-eu",
         "Who do I page for billing?",
         plant="The on-call alias for billing is @billing-oncall-eu.",
         subjects=("on-call",), plant_at=0.7),
    Fact("cutoff", "number", "tool", "21:30 UTC",
         "When do settlement batches close, according to the settlement log?",
         path="logs/settlement.log", tool="execute_bash",
         line="NOTICE settlement batches close at 21:30 UTC",
         ask="Check logs/settlement.log, the settlement job finished late yesterday.",
         subjects=("settlement batches",), plant_at=0.3, size=45_000),
)

# A long message of the user that states one value, once, in its middle.
LONG_HANDOVER = (
    "A handover note from the platform team, since they moved the staging cluster last "
    "week and the wiki has not caught up. The new cluster sits behind the same load "
    "balancer as before, the certificates were renewed on the way, and the old hostnames "
    "keep answering for a while so nothing breaks at once. Most services came over without "
    "trouble; the reporting jobs needed a new service account and the queue consumers a "
    "larger memory limit, both done. The staging port is 8443. Anything that still points "
    "at the old address will keep working until the end of the quarter, when the old "
    "cluster is switched off for good, so there is no rush, but new code should use the "
    "new address from the start. They also asked us to tell them about anything odd we "
    "see in the logs, since the monitoring on the new cluster is still being tuned and "
    "some of the alerts are noisier than they should be. "
)

# Facts of the kinds the strict window, the rule detector and the corrections were built
# for: a corrected value, a softly worded rule, a value stated once in a long message, a
# constraint given only in a tool result.
ENGINE_FACTS = (
    Fact("release", "date", "user", "March 17",
         "When is the release?",
         plant="Heads up: the release moved to March 17.",
         earlier="The release is on March 3.",
         subjects=("release",), superseded=("March 3",), plant_at=0.45),
    Fact("ci-config", "constraint", "user", "did not touch the CI config",
         "Is there a part of the repository I asked you to keep out of?",
         plant="I would rather you did not touch the CI config.",
         subjects=("CI config",), plant_at=0.35),
    Fact("staging-port", "port", "user", "8443",
         "Which port does staging use?",
         plant=LONG_HANDOVER, subjects=("staging port",), plant_at=0.5),
    Fact("major-version", "constraint", "tool", "never bump the major version",
         "What did the contributing guide say about version numbers?",
         path="CONTRIBUTING.md", tool="read_file",
         line="# Releases: never bump the major version without an RFC.",
         ask="Read CONTRIBUTING.md before we change the packaging.",
         subjects=("major version",), plant_at=0.6),
)

# fmt: on

FACTS = USER_FACTS + TOOL_FACTS + HARD_FACTS + ENGINE_FACTS
N_FACTS = len(FACTS)
assert len({f.fid for f in FACTS}) == N_FACTS

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


def answer_text(n: int, anchors: str = "") -> str:
    """The final answer of turn `n`; `anchors`: what its STATE repeats (the script's one
    exception to a STATE that never holds a fact)."""
    state = STATE_TEMPLATE.format(n=n)
    if anchors:
        state = state.replace("(none recorded)", anchors)
    return ANSWERS[n % len(ANSWERS)] + "\n\n" + state


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
    phase: str = "work"  # see PHASES
    before: list[str] = field(default_factory=list)  # commands the user runs first
    state: str = ""  # what the model's STATE repeats in this turn (see answer_text)

    @property
    def kind(self) -> str:
        if self.asks:
            return "ask"
        return "tool" if self.steps else "chat"


# The session's phases: the ordinary ones, then the stress block's.
PHASES = ("plant", "work", "ask", "tool-storm", "topic", "overflow", "guard", "files")
STRESS_PHASES = ("tool-storm", "topic", "overflow", "guard", "files")
STRESS_AT = 0.4  # the stress block starts here (share of the session)


@dataclass
class Plan:
    turns: list[Turn]
    files: dict[str, str]
    plant_until: int
    ask_from: int
    topic: str = ""  # the first words of the prompt that changes the topic

    def fact(self, fid: str) -> Fact:
        return next(f for f in FACTS if f.fid == fid)

    def phase_of(self, n: int) -> str:
        return self.turns[n - 1].phase


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
        self.pasted: list[str] = []  # the overflow pastes so far

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
        size = fact.size or _log_uniform(rnd, 600, 9000)
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


# The stress block, turn by turn (see the module docstring); "work" is an ordinary
# turn that lets the window move on before the next phase.
STRESS_LAYOUT = (
    "tool-storm:paste",
    "tool-storm:loop",
    "topic:change",
    "topic:follow",
    *["work"] * 4,
    "overflow:paste",
    "overflow:paste",
    "overflow:follow",
    *["work"] * 4,
    "guard:paste",
    "guard:tools",
    "guard:paste",
    *["work"] * 4,
    "files:add",
    "files:ask",
    "files:remove",
)
# Sizes in characters, for the token counts the phases need (o200k_base: a log line is
# about 3.3 characters per token, the spec prose about 5.8).
STORM_PASTE_CHARS = 272_000  # ~82k tokens: with the loop's results, past 90 % of the budget
STORM_READS = 40  # 10 steps of 4 parallel reads
STORM_READ_CHARS = 8_000
OVERFLOW_PASTE_CHARS = 160_000  # ~50k tokens each; two of them fit only without the older
GUARD_READS = 8  # 2 steps of 4 reads between two pastes: the older paste is summarised
GUARD_READ_CHARS = 2_000
SPEC_CHARS = 230_000  # ~40k tokens each; three of them do not fit
SPEC_FILES = ("docs/specs/spec_a.md", "docs/specs/spec_b.md", "docs/specs/spec_c.md")
TOPIC_TEXT = (
    "New topic: let's leave the incident logs behind and work on the invoice PDF renderer instead."
)


def spec_doc(rnd: random.Random, size: int, title: str) -> str:
    """Markdown prose about invoices (no digits, so no fact key can occur in it)."""
    out = [f"# {title}\n"]
    n = len(out[0])
    while n < size:
        if rnd.random() < 0.08:
            s = f"\n## The {rnd.choice(_NOUNS).replace('_', ' ')} section\n\n"
        else:
            a, b = rnd.choice(_NOUNS).replace("_", " "), rnd.choice(_NOUNS).replace("_", " ")
            v = rnd.choice(_VERBS)
            s = f"Each {a} is checked before the service will {v} the matching {b}. "
        out.append(s)
        n += len(s)
    return "".join(out) + "\n"


def _stress_turn(b: _Builder, n: int, slot: str, plan_files: dict[str, str]) -> Turn:
    rnd = b.rnd
    if slot == "tool-storm:paste":
        log = app_log(rnd, STORM_PASTE_CHARS)
        text = (
            "Here is last night's whole incident log from the gateway; keep it in mind while "
            "we dig in:\n```\n" + log + "```"
        )
        return Turn(n, text, phase="tool-storm")
    if slot == "tool-storm:loop":
        paths = [f"logs/shards/shard_{i:02d}.log" for i in range(STORM_READS)]
        for p in paths:
            plan_files[p] = app_log(rnd, STORM_READ_CHARS)
        calls = [Call("execute_bash", {"command": f"cat {p}"}, STORM_READ_CHARS) for p in paths]
        steps = [calls[i : i + 4] for i in range(0, len(calls), 4)]
        text = (
            f"Now go through the {STORM_READS} shard logs in logs/shards/ one by one and tell "
            "me which shard fails first."
        )
        return Turn(n, text, steps, phase="tool-storm")
    if slot == "topic:change":
        return Turn(n, TOPIC_TEXT + " How is the page layout built?", phase="topic")
    if slot == "topic:follow":
        steps, kind, target = b.work_steps()
        return Turn(n, "For the renderer: " + _user_prompt(rnd, kind, target), steps, phase="topic")
    if slot == "overflow:paste":
        where = "replica" if not any("replica" in t for t in b.pasted) else "primary"
        b.pasted.append(where)
        text = (
            f"Here is this morning's slow query log from the {where}:\n```\n"
            + app_log(rnd, OVERFLOW_PASTE_CHARS)
            + "```"
        )
        return Turn(n, text, phase="overflow")
    if slot == "guard:paste":
        region = "US" if not any("US" in t for t in b.pasted) else "EU"
        b.pasted.append(region)
        text = (
            f"Here is the billing worker's memory profile from the {region} region:\n```\n"
            + app_log(rnd, OVERFLOW_PASTE_CHARS)
            + "```"
        )
        return Turn(n, text, phase="guard")
    if slot == "guard:tools":
        paths = [f"src/profiling/probe_{i}.py" for i in range(GUARD_READS)]
        for i, p in enumerate(paths):
            plan_files[p] = python_source(rnd, GUARD_READ_CHARS, f"profiling.probe_{i}")
        calls = [Call("read_file", {"path": p}, GUARD_READ_CHARS) for p in paths]
        steps = [calls[i : i + 4] for i in range(0, len(calls), 4)]
        text = "Meanwhile read the eight probes under src/profiling/ and say what each measures."
        return Turn(n, text, steps, phase="guard")
    if slot == "overflow:follow":
        return Turn(n, "Anything alarming in those two slow query logs?", phase="overflow")
    if slot == "files:add":
        for i, p in enumerate(SPEC_FILES):
            plan_files[p] = spec_doc(rnd, SPEC_CHARS, f"Invoice specification {'ABC'[i]}")
        return Turn(
            n,
            "I put the three invoice specifications into the context. Do they agree on how "
            "invoice numbers are assigned?",
            phase="files",
            before=["/file add " + " ".join(SPEC_FILES)],
        )
    if slot == "files:ask":
        return Turn(n, "Which of the specifications talks about credit notes?", phase="files")
    if slot == "files:remove":
        return Turn(
            n,
            "I took the specifications out of the context again. Back to the code: what is "
            "left on our list?",
            phase="files",
            before=[f"/file remove {p}" for p in SPEC_FILES],
        )
    raise ValueError(slot)


def _free_turn(at: int, blocked: set[int], ask_from: int) -> int:
    """The first turn from `at` on that is not blocked and is before the asks (else the last
    free one before them)."""
    n = max(1, at)
    while n in blocked and n < ask_from:
        n += 1
    if n >= ask_from:
        n = ask_from - 1
        while n in blocked and n > 1:
            n -= 1
    return n


def build_plan(turns: int = 300, seed: int = 7, ask_from: int | None = None) -> Plan:
    """The scripted session: the first facts planted in turns 1..turns/5, the harder ones
    where their `plant_at` says, the stress block at `STRESS_AT`, every fact asked from
    `ask_from` on."""
    if turns < 50:
        raise ValueError(f"need at least 50 turns (the stress block takes {len(STRESS_LAYOUT)})")
    b = _Builder(seed)
    rnd = b.rnd
    plant_until = max(1, round(turns * 0.2))
    ask_from = ask_from if ask_from is not None else round(turns * 0.8)
    stress_from = round(turns * STRESS_AT)
    stress = {stress_from + i: slot for i, slot in enumerate(STRESS_LAYOUT)}
    if not plant_until < stress_from and max(stress) < ask_from <= turns:
        raise ValueError(
            f"the asks must start after the stress block (turns {stress_from}-{max(stress)})"
        )
    # The first facts (and the earlier values of corrected ones) in the first fifth.
    early = [(f, f.plant) for f in FACTS if not f.plant_at]
    early += [(f, f.earlier) for f in FACTS if f.earlier]
    rnd.shuffle(early)
    plants: dict[int, list[tuple[Fact, str]]] = {}
    for i, item in enumerate(early):
        plants.setdefault(1 + i * plant_until // len(early), []).append(item)
    blocked = set(stress)
    for f in FACTS:
        if f.plant_at:
            n = _free_turn(round(turns * f.plant_at), blocked, ask_from)
            plants.setdefault(n, []).append((f, f.plant))
    states: dict[int, str] = {}
    for n, items in plants.items():
        for f, _ in items:
            for k in range(min(f.state_turns, turns // 10)):
                states[n + k] = f.plant
    ask_order = list(FACTS)
    rnd.shuffle(ask_order)
    span = turns - ask_from + 1
    asks: dict[int, list[Fact]] = {}
    for i, f in enumerate(ask_order):
        asks.setdefault(ask_from + i * span // len(FACTS), []).append(f)

    out: list[Turn] = []
    for n in range(1, turns + 1):
        if n in asks:
            qs = asks[n]
            text = " ".join(
                (["Quick check before we go on."] if len(qs) == 1 else ["A few quick checks."])
                + [f.question for f in qs]
                + ["Answer from what we discussed earlier."]
            )
            out.append(
                Turn(n, text, asks=[f.fid for f in qs], phase="ask", state=states.get(n, ""))
            )
            continue
        if n in stress and stress[n] != "work":
            out.append(_stress_turn(b, n, stress[n], b.files))
            continue
        planted = plants.get(n, [])
        user_said = [text for f, text in planted if f.source == "user"]
        tool_facts = [f for f, _ in planted if f.source == "tool"]
        if tool_facts:
            steps = [[b.tool_fact_call(f) for f in tool_facts]]
            text = " ".join(f.ask for f in tool_facts)
        elif rnd.random() < 0.25:
            steps, text = [], _user_prompt(rnd, "chat")
        else:
            steps, kind, target = b.work_steps()
            text = _user_prompt(rnd, kind, target)
        if user_said:
            text = " ".join(user_said) + "\n\n" + text
        phase = "plant" if planted else "work"
        fids = [f.fid for f, said in planted if said == f.plant]
        out.append(Turn(n, text, steps, plants=fids, phase=phase, state=states.get(n, "")))
    plan = Plan(out, b.files, plant_until, ask_from, topic=TOPIC_TEXT)
    check_plan(plan)
    return plan


def model_texts(plan: Plan) -> list[str]:
    """Everything the simulated model may say in this plan."""
    texts = [answer_text(t.n, t.state) for t in plan.turns]
    texts += [step_text(n, s) for n in range(len(STEP_TEXTS)) for s in range(3)]
    return texts + [GENERIC_SUMMARY, BOUNDARY_REPLY]


def check_plan(plan: Plan) -> None:
    """Every key occurs once in the scenario, where it is planted (and in the STATE the
    script makes repeat it, which ends before it is asked); an earlier value occurs once,
    in its earlier sentence; each fact's planted sentence is answerable on its own."""
    for f in FACTS:
        if f.key in f.question:
            raise AssertionError(f"fact {f.fid}: the question contains the key")
        if f.source == "user" and f.key not in f.plant:
            raise AssertionError(f"fact {f.fid}: the plant sentence lacks the key")
        if f.source == "tool" and f.key not in f.line:
            raise AssertionError(f"fact {f.fid}: the planted line lacks the key")
        if any(old not in f.earlier or old in f.plant for old in f.superseded):
            raise AssertionError(f"fact {f.fid}: an earlier value is not where it belongs")
        alone = [answerable.Section("plant", f.sentence)]
        if not answerable.check_fact(f.metric(), alone).answerable:
            raise AssertionError(f"fact {f.fid}: no subject phrase in its own sentence")
    texts = [t.text for t in plan.turns] + list(plan.files.values()) + list(plan.files)
    texts += [json.dumps(c.args) for t in plan.turns for s in t.steps for c in s]
    texts += model_texts(plan)
    for f in FACTS:
        repeated = [t.n for t in plan.turns if f.key in t.state]
        asked = next(t.n for t in plan.turns if f.fid in t.asks)
        if repeated and max(repeated) >= asked:
            raise AssertionError(f"fact {f.fid}: STATE still repeats it when it is asked")
        hits = sum(t.count(f.key) for t in texts)
        if hits != 1 + len(repeated):
            raise AssertionError(f"fact {f.fid}: key {f.key!r} occurs {hits} times in the scenario")
        for old in f.superseded:
            if sum(t.count(old) for t in texts) != 1:
                raise AssertionError(f"fact {f.fid}: earlier value {old!r} is not unique")
