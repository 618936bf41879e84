"""`### STATE` and `SCRATCHPAD:` extraction edge cases."""

from __future__ import annotations

import pytest

from slop_tui.context.anchors import extract_scratchpad_signal, extract_state, without_state

STATE = "### STATE\nGoal: ship\nContext: app.py\nResolved: none\nTechnical Anchors: port 8080"


def test_state_at_the_end_of_a_reply() -> None:
    assert extract_state(f"### THOUGHT\nthinking\n\nDone.\n\n{STATE}\n") == STATE


def test_no_state() -> None:
    assert extract_state("just an answer") is None
    assert extract_state("") is None
    # Not a header: mid-line, different case, or a longer word.
    assert extract_state("see ### STATE below") is None
    assert extract_state("### state\nGoal: x") is None
    assert extract_state("### STATEMENT\nGoal: x") is None


@pytest.mark.parametrize(
    "text", ["### STATE", "### STATE\n", "### STATE\n\n   \n", "### STATE\n---\nx"]
)
def test_empty_block_is_none(text: str) -> None:
    assert extract_state(text) is None


def test_block_ends_at_the_next_heading() -> None:
    text = "### STATE\nGoal: a\n## Another Header\nmore"
    assert extract_state(text) == "### STATE\nGoal: a"
    assert extract_state("### STATE\nGoal: a\n# Top\n") == "### STATE\nGoal: a"


def test_block_ends_at_a_rule_even_when_a_heading_follows_later() -> None:
    # Stricter than the reference tool, which ran on to the heading.
    text = "### STATE\nGoal: a\n---\nfooter text\n## Next\n"
    assert extract_state(text) == "### STATE\nGoal: a"
    assert extract_state("### STATE\nGoal: a\n----  \nx") == "### STATE\nGoal: a"


def test_hash_without_space_is_not_a_heading() -> None:
    text = "### STATE\nGoal: fix\n#123 closed\n- item --- inline dashes"
    assert extract_state(text) == text


def test_same_line_content_counts() -> None:
    assert extract_state("### STATE: Goal: ship it") == "### STATE: Goal: ship it"


def test_state_inside_a_code_fence_is_ignored() -> None:
    text = "Example format:\n```markdown\n### STATE\nGoal: example\n```\nNo real state."
    assert extract_state(text) is None
    tilde = "~~~\n### STATE\nGoal: example\n~~~\n"
    assert extract_state(tilde) is None


def test_fenced_hash_line_inside_the_block_does_not_end_it() -> None:
    text = "### STATE\nGoal: run\n```bash\n# a comment\nmake\n```\nContext: Makefile\n## After"
    assert extract_state(text) == (
        "### STATE\nGoal: run\n```bash\n# a comment\nmake\n```\nContext: Makefile"
    )


def test_the_last_complete_block_wins() -> None:
    text = (
        "The previous state was:\n### STATE\nGoal: old\n\n"
        "Now updated.\n\n### STATE\nGoal: new\n\n### STATE\n"
    )
    assert extract_state(text) == "### STATE\nGoal: new"


def test_indented_header_up_to_three_spaces() -> None:
    assert extract_state("   ### STATE\nGoal: a") == "### STATE\nGoal: a"
    assert extract_state("    ### STATE\nGoal: a") is None  # 4 spaces: a code block


def test_crlf_line_endings() -> None:
    assert extract_state("x\r\n### STATE\r\nGoal: a\r\n## End\r\n") == "### STATE\r\nGoal: a"
    assert extract_state("### STATE\r\nGoal: a\r\n---\r\nx") == "### STATE\r\nGoal: a"
    assert extract_state("### STATE\r\nGoal: a\r\n##\r\nx") == "### STATE\r\nGoal: a"


# --- SCRATCHPAD: ------------------------------------------------------------------------


def test_scratchpad_signal_runs_to_the_end() -> None:
    text = "Updated.\nSCRATCHPAD:## Current Understanding\n- Go project\n\n## Plan\n- [x] read"
    assert (
        extract_scratchpad_signal(text)
        == "## Current Understanding\n- Go project\n\n## Plan\n- [x] read"
    )


def test_scratchpad_signal_stops_at_state_or_signal() -> None:
    text = f"SCRATCHPAD:\n## Plan\n- step\n\n{STATE}"
    assert extract_scratchpad_signal(text) == "## Plan\n- step"
    assert extract_scratchpad_signal("SCRATCHPAD: plan\nSIGNAL: done") == "plan"


def test_scratchpad_absent_or_empty() -> None:
    assert extract_scratchpad_signal("no signal here") is None
    assert extract_scratchpad_signal("SCRATCHPAD:\n   \n" + STATE) is None
    # Only at the start of a line.
    assert extract_scratchpad_signal("I will update the SCRATCHPAD: later") is None


def test_scratchpad_in_a_fence_is_ignored_but_fences_inside_it_are_kept() -> None:
    assert extract_scratchpad_signal("```\nSCRATCHPAD: example\n```") is None
    text = "SCRATCHPAD:\n## Notes\n```\n### STATE\n```\nend"
    assert extract_scratchpad_signal(text) == "## Notes\n```\n### STATE\n```\nend"


def test_last_scratchpad_signal_wins() -> None:
    assert extract_scratchpad_signal("SCRATCHPAD: one\nSCRATCHPAD: two\n") == "two"
    assert extract_scratchpad_signal("SCRATCHPAD: one\nSCRATCHPAD:\n") == "one"


def test_without_state_removes_the_block_and_keeps_the_rest() -> None:
    reply = f"Done, the tests pass.\n\n{STATE}\n\n## Next\nShip it.\n"
    assert without_state(reply) == "Done, the tests pass.\n\n## Next\nShip it."
    assert without_state(f"Done.\n{STATE}\n---\nafter the rule") == "Done.\n---\nafter the rule"
    # A STATE shown inside a code fence is an example, not the block.
    fenced = "Like this:\n```\n### STATE\nGoal: x\n```\nThat is all."
    assert without_state(fenced) == fenced
    assert without_state("no state here") == "no state here"
