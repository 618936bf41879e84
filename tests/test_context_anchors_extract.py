"""Anchor kinds of `extract_anchor_items`, the rolled-summary merge and the prose bound."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slop_tui.context.summaries import (
    ANCHORS_HEADER,
    MAX_ANCHOR_CHARS,
    MAX_TOOL_ERRORS,
    MAX_TOOL_VALUES,
    PRIORITY_KEEP,
    PRIORITY_OTHER,
    PRIORITY_TOOL,
    PRIORITY_USER,
    Anchor,
    bound_prose,
    carried_anchor_items,
    carried_anchors,
    complete_summary,
    extract_anchor_items,
    merge_anchors,
    supersede,
    supersedes,
)
from tests.test_context_factories import result, user


def _user(text: str) -> dict[str, int]:
    """text -> priority of the anchors of one user message."""
    return {a.text: a.priority for a in extract_anchor_items([user(1, 1, text)])}


def _tool(text: str) -> dict[str, int]:
    return {a.text: a.priority for a in extract_anchor_items([result(2, 1, "c1", "x", text)])}


def _has(found: dict[str, int], key: str, priority: int | None = None) -> bool:
    hits = [p for t, p in found.items() if key in t]
    return bool(hits) and (priority is None or min(hits) <= priority)


@pytest.mark.parametrize(
    ("text", "key", "kind"),
    [
        (
            "OK, decided: retries capped at 7 with jittered backoff.",
            "retries capped at 7",
            "decision",
        ),
        ("We'll use msgspec instead of pydantic.", "msgspec instead of pydantic", "decision"),
        ("Going with uvloop instead of the default loop.", "uvloop instead of", "decision"),
        ("We agreed that keys expire after 36 hours.", "36 hours", "decision"),
        ("Never log full card numbers.", "never log full card numbers", "constraint"),
    ],
)
def test_user_decisions_and_constraints_are_never_given_up(text, key, kind) -> None:
    items = extract_anchor_items([user(1, 1, text)])
    hit = [a for a in items if key.lower() in a.text.lower() and a.kind == kind]
    assert hit and hit[0].priority == PRIORITY_KEEP


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("The code freeze starts on 2024-11-22.", "2024-11-22"),
        ("All of this tracks ticket BILL-4412.", "BILL-4412"),
        ("Marta (@marta-okafor) owns the payments schema.", "@marta-okafor"),
        ("The nightly job uses a batch size of 1750 rows.", "1750 rows"),
        ("The client should use a read timeout of 30 s.", "30 s"),
        ("Give up after 7 retries.", "7 retries"),
        ("The cron runs at `17 3 * * *` UTC.", "17 3 * * *"),
        ("Use the table `billing_events_v2` for new queries.", "billing_events_v2"),
        ("Reads go to pg-replica-02.internal:6432 via pgbouncer.", "pg-replica-02.internal:6432"),
        ("The cache is redis://cache-7.internal:6390/4 now.", "redis://cache-7.internal:6390/4"),
        (
            "The docs are at https://example.com/v2/health by the way.",
            "https://example.com/v2/health",
        ),
        ("The regression came with commit a3f9c2e last week.", "a3f9c2e"),
        ("Set WORKER_CONCURRENCY=12 in the env.", "WORKER_CONCURRENCY=12"),
        ("The rollout is behind the BILLING_LEDGER_V3_ENABLED flag.", "BILLING_LEDGER_V3_ENABLED"),
        ("Artifacts go to /srv/billing/releases on the build host.", "/srv/billing/releases"),
        ("The Stripe code lives in services/ledger/stripe_adapter.py.", "services/ledger/"),
        ("The function that matters is reconcile_invoice_batch.", "reconcile_invoice_batch"),
    ],
)
def test_user_stated_values(text, key) -> None:
    assert _has(_user(text), key, PRIORITY_USER)


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("Is there a file I told you must not be modified?", "must not be modified"),
        ("Open src/billing/mod_003.py and explain how load_invoice works.", "load_invoice"),
        ("Let's rename sync_account to something clearer.", "sync_account"),
        ("I need to find where the credit_note logic lives.", "credit_note"),
        ("Which 3 files changed?", "3 files"),
    ],
)
def test_requests_and_questions_are_not_facts(text, absent) -> None:
    found = _user(text)
    assert not _has(found, absent, PRIORITY_USER)
    assert not any(p == PRIORITY_KEEP for p in found.values())


def test_a_host_port_is_no_count_and_its_sentence_is_kept() -> None:
    # "6432 on" is no count of anything; the sentence says what the value is.
    assert _user("The port is 8000:6432 on the host.") == {
        "The port is 8000:6432 on the host.": PRIORITY_USER
    }


def test_plain_prose_and_bare_numbers_are_not_anchors() -> None:
    assert _user("Thanks, that looks fine to me") == {}
    assert _user("Try it 2 or 3 times") == {}  # "2 or": a stop word is no noun
    assert not _has(_user("The hash deadbeef is just a word"), "deadbeef")


def test_tool_output_values() -> None:
    config = "\n".join(
        ["# generated for the service"]
        + [f"{i}: key_{i} = {i}" for i in range(1, 15)]
        + ['20: redis_url = "redis://cache-7.internal:6390/4"', "21: line-length = 104"]
        + [f"{i}: key_{i} = {i}" for i in range(22, 30)]
    )
    found = _tool(config)
    assert _has(found, "redis://cache-7.internal:6390/4", PRIORITY_TOOL)
    assert _has(found, "line-length = 104", PRIORITY_TOOL)  # breaks the file's pattern
    assert not _has(found, "key_3 = 3")
    assert not _has(found, "generated for the service")  # a comment, not a value
    env = "STRIPE_WEBHOOK_TOLERANCE=300\nDEBUG=false\nMAX_LINE_ITEMS = 250\n/srv/ @billing-core"
    found = _tool(env)
    for key in ("STRIPE_WEBHOOK_TOLERANCE=300", "MAX_LINE_ITEMS = 250", "@billing-core"):
        assert _has(found, key, PRIORITY_TOOL)


def test_tool_values_are_capped_per_result() -> None:
    consts = "\n".join(f"LIMIT_{i} = {i}" for i in range(40))
    values = [a for a in extract_anchor_items([result(2, 1, "c1", "x", consts)])]
    assert len(values) == MAX_TOOL_VALUES


def test_log_outliers_and_error_lines_are_few_and_deduplicated() -> None:
    lines = [f"12:00:{i:02d} INFO billing.invoice load_invoice id={i} took=3" for i in range(40)]
    lines.insert(20, "WARN moving message 8812 to billing.events.dlq after max deliveries")
    lines += [f"tests/test_a.py::test_{i} FAILED" for i in range(30)]
    lines += ["FAILED tests/test_r.py::test_round - AssertionError: assert 1999 == 2000"] * 3
    found = _tool("\n".join(lines))
    assert _has(found, "billing.events.dlq", PRIORITY_TOOL)
    errors = [t for t in found if "FAILED" in t]
    assert len(errors) <= MAX_TOOL_ERRORS
    assert errors[0].startswith("FAILED tests/test_r.py::test_round")  # a message: first
    assert found[errors[0]] == PRIORITY_TOOL
    assert not any("took=3" in t for t in found)  # the repeated lines are noise


def test_source_code_is_not_mined_for_outliers() -> None:
    code = "\n".join(
        f"{i}: {line}"
        for i, line in enumerate(
            ["def f(x):", "    y = x + 1", "    return y", "", "class A:", "    pass"] * 3, 1
        )
    )
    assert not any(p == PRIORITY_TOOL for p in _tool(code).values())


def test_pasted_blocks_count_as_tool_output() -> None:
    text = "Here is what I see:\n```\n" + "\n".join(f"x{i} = {i}" for i in range(10)) + "\n```"
    assert not any(p <= PRIORITY_USER for p in _user(text).values())


def test_merge_anchors_dedupes_caps_and_keeps_constraints() -> None:
    carried = [
        Anchor("constraint", "never edit vendor/a.py", PRIORITY_KEEP),
        Anchor("value", "1750 rows", PRIORITY_USER),
        Anchor("path", "src/old.py", PRIORITY_OTHER),
    ]
    new = [
        Anchor("path", "vendor/a.py", PRIORITY_USER),  # inside the constraint: dropped
        Anchor("value", "1750  ROWS", PRIORITY_USER),  # same once squashed
        *[Anchor("value", f"V{i}=1", PRIORITY_TOOL) for i in range(5)],
        Anchor("path", "src/new.py", PRIORITY_OTHER),
        Anchor("constraint", "always run with --dry-run", PRIORITY_KEEP),
    ]
    out = merge_anchors(carried, new, limit=5)
    texts = [a.text for a in out]
    assert texts[:2] == ["never edit vendor/a.py", "1750 rows"]
    assert "vendor/a.py" not in texts and "1750  ROWS" not in texts
    assert "always run with --dry-run" in texts
    # Over the limit: paths go first (the oldest first), then the newest tool values.
    assert "src/old.py" not in texts and "src/new.py" not in texts
    assert texts[2:4] == ["V0=1", "V1=1"] and len(out) == 5
    # Constraints and decisions are never dropped, even past the limit.
    many = [Anchor("constraint", f"never do {i}", PRIORITY_KEEP) for i in range(8)]
    assert len(merge_anchors(many, [Anchor("value", "x=1", PRIORITY_USER)], limit=3)) == 8


def test_tagged_anchors_round_trip_through_a_summary() -> None:
    items = [Anchor("decision", "decided: X instead of Y", 0), Anchor("value", "BILL-1", 1)]
    text = complete_summary("## User Intent\n- generic", items)
    assert f"{ANCHORS_HEADER}\n- [decision/0] decided: X instead of Y\n- [value/1] BILL-1\n" in text
    assert carried_anchor_items(text) == items
    assert carried_anchors(text) == ["decided: X instead of Y", "BILL-1"]
    # Untagged items (older summaries) read back as stated values.
    assert carried_anchor_items(f"{ANCHORS_HEADER}\n- port 80\n") == [Anchor("value", "port 80", 1)]


def test_bound_prose_cuts_at_a_line() -> None:
    text = "\n".join(f"- line {i} " + "word " * 10 for i in range(100))
    out = bound_prose(text, 50)
    assert len(out) < len(text) and out.splitlines()[0].startswith("- line 0")
    assert out.endswith("details via query_db)")
    assert bound_prose("short", 50) == "short"


def test_a_megabyte_output_is_read_by_its_head_and_tail(monkeypatch) -> None:
    from slop_tui.context import summaries

    noise = "".join(f"one line of a very chatty build log {i}\n" for i in range(130_000))
    output = "see https://ci.example.com/run/42\n" + noise + "DEPLOY_TARGET=eu-west-2\n"
    scanned: list[int] = []
    real = summaries._tool_items
    monkeypatch.setattr(
        summaries, "_tool_items", lambda text: scanned.append(len(text)) or real(text)
    )
    texts = [a.text for a in extract_anchor_items([result(2, 1, "c1", "execute_bash", output)])]
    assert len(output) > 5_000_000 and len(scanned) == 1
    assert summaries.ANALYSED_CHARS - 100 < scanned[0] <= summaries.ANALYSED_CHARS + 1
    whole = set(output.splitlines())
    assert all(t in whole for t in texts)  # no line cut in two (an odd one out)
    assert "see https://ci.example.com/run/42" in texts  # from the head, with its line
    assert "DEPLOY_TARGET=eu-west-2" in texts  # from the tail


# --- what a model can use: the end of a long sentence, soft wording, subjects, corrections ---

FILLER = ", ".join(f"the {w} part of the story went somewhere else" for w in "abcdefghij")
LONG_RULE = f"So, after {FILLER}, here is the one thing to remember from all of it: we never deploy on Fridays."


def test_a_long_constraint_keeps_its_end_not_its_head() -> None:
    assert len(LONG_RULE) > MAX_ANCHOR_CHARS + 100
    kept = [a for a in extract_anchor_items([user(1, 1, LONG_RULE)]) if a.kind == "constraint"]
    assert len(kept) == 1 and kept[0].priority == PRIORITY_KEEP
    text = kept[0].text
    assert text.endswith("we never deploy on Fridays.") and text.startswith("...")
    assert len(text) <= MAX_ANCHOR_CHARS + 3
    # A constraint word early in the sentence keeps its own clause, the rule keeps its own.
    early = "We always had trouble here, " + LONG_RULE[3:]
    texts = [a.text for a in extract_anchor_items([user(1, 1, early)]) if a.kind == "constraint"]
    assert any(t.startswith("We always had trouble") for t in texts)
    assert any(t.endswith("never deploy on Fridays.") for t in texts)


@pytest.mark.parametrize(
    "text",
    [
        "Please avoid force-pushing to main.",
        "Prefer rebase.",
        "Ideally, keep each pull request under 400 changed lines.",
        "Make sure the migrations run with a dry run first.",
        "We should not call the partner API from the web workers.",
        "Stick to the sandbox account for every test.",
        "It is best not to touch the generated clients.",
        "Try not to log request bodies.",
    ],
)
def test_softly_worded_constraints_are_constraints(text) -> None:
    found = _user(text)
    assert found == {text: PRIORITY_KEEP}


@pytest.mark.parametrize(
    "text",
    [
        "Let's try to finish the refactor today.",
        "I think the tests should pass now.",
        "Which option do you prefer?",
    ],
)
def test_ordinary_talk_is_not_a_constraint(text) -> None:
    assert PRIORITY_KEEP not in _user(text).values()


def test_stated_values_keep_their_subject() -> None:
    found = _user("The nightly job uses a batch size of 1750 rows.")
    assert found == {"The nightly job uses a batch size of 1750 rows.": PRIORITY_USER}
    # A long sentence keeps the clauses around the value, not its head.
    long = (
        "While you are in there, note that the staging stack is not what the README says, "
        "because the platform team moved it twice this quarter and renamed half of the "
        "services on the way, and the staging database for all of that is billing_stg_eu3."
    )
    (text,) = [t for t in _user(long) if "billing_stg_eu3" in t]
    assert "staging database" in text and len(text) <= 160 + 6 and text.startswith("...")
    # A request keeps its values bare: it states nothing about them.
    assert _user("Please check BILL-4412 again.") == {"BILL-4412": PRIORITY_USER}


def test_tool_values_keep_their_line() -> None:
    found = _tool(
        'x = 1\nredis_url = "redis://cache-7.internal:6390/4"\n'
        "  - WORKER_CONCURRENCY=12\nStaging dashboard: https://grafana.example.com/d/7Hq2x\n"
    )
    assert set(found) == {
        'redis_url = "redis://cache-7.internal:6390/4"',
        "WORKER_CONCURRENCY=12",
        "Staging dashboard: https://grafana.example.com/d/7Hq2x",
    }


def test_junk_is_not_an_anchor() -> None:
    assert _user("I have 1 about that, and 2 more later.") == {}
    log = "\n".join(f"tests/test_a.py::test_{i} FAILED" for i in range(5))
    assert _tool(log) == {}  # bare status lines; the test run can be repeated
    assert _tool("FAILED tests/t.py::test_r - AssertionError: assert 1 == 2") == {
        "FAILED tests/t.py::test_r - AssertionError: assert 1 == 2": PRIORITY_TOOL
    }


def test_an_anchor_held_by_state_survives_the_state_changing() -> None:
    said = "The FX conversion uses banker's rounding, ROUND_HALF_EVEN, for every currency."
    anchors = merge_anchors([], extract_anchor_items([user(1, 1, said)]))
    # STATE (and the scratchpad) hold it today: it is written into the summary anyway.
    first = complete_summary("## User Intent\n- generic", anchors, state=said, scratchpad=said)
    assert said in first
    # The next roll carries it; STATE no longer holds it.
    carried = carried_anchor_items(first)
    new = extract_anchor_items([user(9, 9, "Run the unit tests again.")])
    second = complete_summary("## User Intent\n- still generic", merge_anchors(carried, new))
    assert said in second


def test_a_correction_supersedes_the_earlier_value() -> None:
    old = user(1, 1, "The webhook retry window is 45 minutes.")
    new = user(5, 5, "Correction on the webhook retry window: it is 90 minutes now.")
    # In one span: only the later statement stays.
    texts = [a.text for a in extract_anchor_items([old, new])]
    assert texts == ["Correction on the webhook retry window: it is 90 minutes now."]
    # Across rolled summaries: the carried one gives way to the new one.
    carried = carried_anchor_items(complete_summary("", extract_anchor_items([old])))
    merged = [a.text for a in merge_anchors(carried, extract_anchor_items([new]))]
    assert merged == ["Correction on the webhook retry window: it is 90 minutes now."]
    # The other way round nothing is superseded: the older one carries no cue.
    assert len(extract_anchor_items([new, old])) == 2


def test_what_is_not_a_correction() -> None:
    old = Anchor("number", "Heads-up: in the dev stack the API listens on port 48213.", 1)
    # A cue, but about another thing (too few shared subject words).
    other = Anchor("number", "Update: the API now also exposes metrics on port 9100.", 1)
    assert not supersedes(other, old)
    # The same subject without a cue is a second statement, not a correction.
    again = Anchor("number", "In the dev stack the API listens on port 48214.", 1)
    assert not supersedes(again, old)
    # A tool value never corrects, an error line is never corrected.
    assert not supersedes(replace(other, priority=PRIORITY_TOOL), old)
    err = Anchor("error", "ValueError: the API listens on port 48213 now", 2)
    assert not supersedes(Anchor("value", "Now the API listens on port 1.", 1), err)
    assert supersede([old, other, again]) == [old, other, again]
