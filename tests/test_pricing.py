"""Cost in money: the price table, `[prices]` overrides, usage rows priced through the
real SDKs against the wire-format server, `/stats`, export, and the `[budget]` guard."""

from __future__ import annotations

import contextlib
import json
from decimal import Decimal

import pytest

from slop_tui.commands import dispatch
from slop_tui.config import load_config
from slop_tui.orchestrator import ErrorEvent, Notice, Orchestrator
from slop_tui.pricing import (
    BUDGET_OK,
    BUDGET_OVER,
    BUDGET_WARN,
    PRICE_UNKNOWN,
    check_budget,
    format_usd,
    parse_overrides,
    price_call,
)
from slop_tui.records import Spend, UsageCost
from tests.fakeserver import Reply
from tests.workspace_fixtures import open_workspace

MINI = {"input": 0.15, "cached": 0.075, "output": 0.60}  # gpt-4o-mini, USD per 1M tokens


def mini_cost(prompt: int, cached: int, completion: int) -> float:
    return ((prompt - cached) * MINI["input"] + cached * MINI["cached"]) / 1e6 + (
        completion * MINI["output"] / 1e6
    )


def call(model: str, kind: str = "openai", base_url: str | None = None, **tokens):
    counts = {"prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0} | tokens
    return price_call(model=model, kind=kind, base_url=base_url, **counts)


# -- the table -------------------------------------------------------------------------


def test_a_model_costs_the_same_whatever_the_base_url():
    tokens = {"prompt_tokens": 200_000, "cached_tokens": 50_000, "completion_tokens": 4_000}
    official = call("gpt-4o-mini", **tokens)
    proxied = call("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", **tokens)
    routed = call("openai/gpt-4o-mini", base_url="http://proxy.internal/v1", **tokens)
    assert official is not None and official == proxied == routed
    assert official.total == pytest.approx(mini_cost(200_000, 50_000, 4_000))
    assert official.cached == pytest.approx(50_000 * MINI["cached"] / 1e6)
    assert official.saved == pytest.approx(50_000 * (MINI["input"] - MINI["cached"]) / 1e6)


def test_parts_add_up_to_the_tables_total_and_reasoning_is_output():
    from genai_prices import Usage, calc_price

    cost = call(
        "gemini-2.5-pro",
        kind="gemini",
        prompt_tokens=300_000,  # above the 200k tier: the higher rates apply
        cached_tokens=100_000,
        completion_tokens=2_000,
        reasoning_tokens=500,
    )
    table = calc_price(
        Usage(input_tokens=300_000, cache_read_tokens=100_000, output_tokens=2_000),
        "gemini-2.5-pro",
        provider_id="google",
    )
    assert cost is not None
    assert Decimal(str(cost.total)).quantize(Decimal("1e-9")) == table.total_price.quantize(
        Decimal("1e-9")
    )
    assert cost.reasoning == pytest.approx(cost.output / 3)  # 500 of 2,000, 1,500 left
    assert cost.input + cost.cached == pytest.approx(float(table.input_price))


def test_openrouter_prices_by_its_own_catalogue():
    cost = call(
        "anthropic/claude-sonnet-4",
        base_url="https://openrouter.ai/api/v1",
        prompt_tokens=1_000_000,
        cached_tokens=0,
        completion_tokens=0,
    )
    assert cost is not None and cost.total == pytest.approx(3.0)  # $3 per 1M input tokens


def test_unknown_model_has_no_price_and_the_demo_costs_nothing():
    assert call("my-private-llm", base_url="http://10.0.0.5/v1", prompt_tokens=5) is None
    assert format_usd(None) == PRICE_UNKNOWN
    demo = call("slop-demo", kind="demo", prompt_tokens=500, completion_tokens=50)
    assert demo is not None and demo.total == 0


def test_the_price_table_is_never_fetched(monkeypatch):
    from genai_prices import data_snapshot, update_prices

    def refuse(*args, **kwargs):
        raise AssertionError("the price table must not be fetched")

    monkeypatch.setattr(update_prices.UpdatePrices, "start", refuse)
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", refuse)
    assert call("gpt-4.1", prompt_tokens=10, completion_tokens=1) is not None
    assert data_snapshot._custom_snapshot is None


# -- [prices] overrides ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"input": -1, "output": 2},
            "[prices.mine] input = -1 is negative; this price is ignored.",
        ),
        (
            {"input": "cheap", "output": 2},
            "[prices.mine] input = 'cheap' is not a number of USD per million tokens; "
            "this price is ignored.",
        ),
        (
            {"input": 1, "output": 2, "currency": "EUR"},
            "[prices.mine] currency 'EUR' is not supported (prices are in USD); "
            "this price is ignored.",
        ),
        (
            {"input": 1},
            "[prices.mine] needs output (USD per million tokens); this price is ignored.",
        ),
    ],
)
def test_a_bad_override_is_one_line_and_invents_no_figure(tmp_path, entry, message):
    rates, errors = parse_overrides({"mine": entry, "good": {"input": 1, "output": 2}})
    assert errors == [message] and list(rates) == ["good"]
    # Through config.toml: the same line as a warning, the valid override kept.
    cfg = tmp_path / "config.toml"
    lines = ["[prices.mine]"] + [f"{k} = {json.dumps(v)}" for k, v in entry.items()]
    lines += ["[prices.good]", "input = 1", "output = 2"]
    cfg.write_text("\n".join(lines) + "\n")
    config = load_config(db=str(tmp_path / "x.db"), env={"SLOP_CONFIG": str(cfg)}, cwd=tmp_path)
    assert [w for w in config.warnings if "prices" in w] == [f"{cfg}: {message}"]
    assert set(config.prices) == {"good"}
    overrides = parse_overrides(config.prices)[0]
    assert call("mine", base_url="http://x/v1", prompt_tokens=10) is None
    priced = price_call(
        model="good",
        kind="openai",
        base_url="http://x/v1",
        prompt_tokens=1_000_000,
        cached_tokens=0,
        completion_tokens=1_000_000,
        overrides=overrides,
    )
    assert priced is not None and priced.total == pytest.approx(3.0)


def test_override_wins_and_cached_input_without_a_rate_pays_the_input_rate():
    overrides, _ = parse_overrides({"gpt-4o-mini": {"input": 1.0, "output": 1.0}})
    cost = price_call(
        model="gpt-4o-mini",
        kind="openai",
        base_url=None,
        prompt_tokens=1_000_000,
        cached_tokens=400_000,
        completion_tokens=0,
        overrides=overrides,
    )
    assert cost is not None and cost.source == "config"
    assert (cost.input, cost.cached, cost.saved) == pytest.approx((0.6, 0.4, 0.0))


# -- usage rows through the real SDKs --------------------------------------------------


def env_for(fake_llm, model: str = "gpt-4o-mini", **extra) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": fake_llm.openai_base_url,
        "OPENAI_MODEL": model,
        "GEMINI_API_KEY": "x",
        "GEMINI_BASE_URL": fake_llm.gemini_base_url,
        **extra,
    }


@contextlib.asynccontextmanager
async def turns(tmp_path, fake_llm, config: str = "", confirm_spend=None, **env):
    """A workspace (with `config` as the user's config.toml) and its orchestrator."""
    if config:
        (tmp_path / "user.toml").write_text(config)
        env["SLOP_CONFIG"] = str(tmp_path / "user.toml")
    ws = await open_workspace(tmp_path, env=env_for(fake_llm, **env))
    orch = Orchestrator(ws, confirm_spend=confirm_spend)
    try:
        yield ws, orch
    finally:
        await orch.aclose()
        await ws.close()


async def test_openai_cached_and_reasoning_tokens_are_priced_into_the_row(tmp_path, fake_llm):
    async with turns(tmp_path, fake_llm) as (ws, orch):
        fake_llm.enqueue(
            Reply(
                text="ok",
                prompt_tokens=40_000,
                cached_tokens=30_720,
                completion_tokens=900,
                reasoning_tokens=300,
            )
        )
        out = await orch.run_turn("hello")
        assert out.error is None
        usage = await ws.ledger.last_usage(ws.session)
        assert (usage.cached_tokens, usage.reasoning_tokens, usage.reported) == (30_720, 300, True)
        assert usage.cost is not None and usage.cost.source == "genai-prices"
        assert usage.cost.total == pytest.approx(mini_cost(40_000, 30_720, 900))
        assert usage.cost.reasoning == pytest.approx(300 * MINI["output"] / 1e6)
        assert usage.cost.saved == pytest.approx(30_720 * (MINI["input"] - MINI["cached"]) / 1e6)
        stats = (await dispatch(ws, "/stats")).text
        assert "| gpt-4o-mini | 1 | 40000 | 900 | 30720 |" in stats
        assert f"the cache saved {format_usd(usage.cost.saved)}" in stats
        assert ws.cost_label() == format_usd(usage.cost.total)


async def test_gemini_cached_content_tokens_are_read(tmp_path, fake_llm):
    async with turns(tmp_path, fake_llm) as (ws, orch):
        await ws.ledger.set_provider(ws.session, "gemini", "gemini-2.5-flash")
        fake_llm.enqueue(
            Reply(text="ok", prompt_tokens=8_000, cached_tokens=6_000, completion_tokens=100)
        )
        assert (await orch.run_turn("hello")).error is None
        assert fake_llm.last_chat.provider == "gemini"
        usage = await ws.ledger.last_usage(ws.session)
        assert (usage.prompt_tokens, usage.cached_tokens) == (8_000, 6_000)
        # gemini-2.5-flash: $0.30 input, $0.03 cached input, $2.50 output per 1M tokens.
        expected = (2_000 * 0.30 + 6_000 * 0.03 + 100 * 2.50) / 1e6
        assert usage.cost is not None and usage.cost.total == pytest.approx(expected)


async def test_a_provider_that_reports_no_usage(tmp_path, fake_llm):
    async with turns(tmp_path, fake_llm) as (ws, orch):
        fake_llm.enqueue(Reply(text="an answer", usage=False))
        events = []
        out = await orch.run_turn("hello", events.append)
        assert out.error is None and out.text == "an answer"  # the answer is kept
        [notice] = [e.text for e in events if isinstance(e, Notice) and "usage" in e.text]
        assert notice.startswith("openai reported no usage for this call")
        usage = await ws.ledger.last_usage(ws.session)
        assert usage.reported is False and usage.cost is None
        stats = (await dispatch(ws, "/stats")).text
        assert "| turn | gpt-4o-mini | 0 | 0 | 0 | 0 | no usage reported |" in stats
        assert "Session: 1 without usage in 1 call(s)" in stats
        assert ws.cost_label() == "1 without usage"


async def test_unknown_model_is_price_unknown_everywhere(tmp_path, fake_llm):
    async with turns(tmp_path, fake_llm, model="house-model-7") as (ws, orch):
        fake_llm.enqueue(Reply(text="ok", prompt_tokens=1000, completion_tokens=10))
        assert (await orch.run_turn("hello")).error is None
        assert (await ws.ledger.last_usage(ws.session)).cost is None
        stats = (await dispatch(ws, "/stats")).text
        assert "| house-model-7 | 1 | 1000 | 10 | 0 | 1 call price unknown |" in stats
        assert "$" not in stats.split("## Cost")[1].split("| lane")[0].replace("$0.00", "")
        assert ws.cost_label() == "1 call price unknown"
        path = tmp_path / "out.json"
        await dispatch(ws, f"/export json {path}")
        [row] = json.loads(path.read_text())["usage"]
        assert row["cost"] is None and row["prompt_tokens"] == 1000


async def test_export_carries_the_cost(tmp_path, fake_llm):
    async with turns(tmp_path, fake_llm) as (ws, orch):
        fake_llm.enqueue(Reply(text="ok", prompt_tokens=10_000, completion_tokens=100))
        await orch.run_turn("hello")
        total = (await ws.ledger.last_usage(ws.session)).cost.total
        md, js = tmp_path / "s.md", tmp_path / "s.json"
        await dispatch(ws, f"/export markdown {md}")
        await dispatch(ws, f"/export json {js}")
        assert f"- Cost: {format_usd(total)} in 1 call(s), background $0.00" in md.read_text()
        [row] = json.loads(js.read_text())["usage"]
        assert row["cost"]["input"] + row["cost"]["output"] == pytest.approx(total)


# -- the spending guard ----------------------------------------------------------------


def test_budget_levels():
    spent = Spend(calls=3, cost=0.85, background=Spend(calls=1, cost=0.05))
    assert check_budget(spent, Spend(), None, None).level == BUDGET_OK
    warn = check_budget(spent, Spend(), 1.0, None)
    assert warn.level == BUDGET_WARN
    assert warn.text == (
        "This session has cost $0.85 ($0.05 of it background calls), 85 % of the $1.00 "
        "limit ([budget] session_cost_limit)."
    )
    over = check_budget(spent, Spend(calls=9, cost=2.0), 1.0, 2.0)
    assert over.level == BUDGET_OVER and "daily_cost_limit" in over.text
    partial = check_budget(Spend(calls=2, cost=1.0, unpriced=1), Spend(), 1.0, None)
    assert partial.text.endswith("; not counted: 1 call price unknown.")


async def _spend(ws, cost: float, purpose: str = "turn") -> None:
    await ws.ledger.record_usage(
        ws.session,
        None,
        "openai",
        "gpt-4o-mini",
        1000,
        10,
        purpose=purpose,
        cost=UsageCost(cost, 0, 0, 0, 0, "genai-prices"),
    )


async def test_budget_notice_at_80_and_a_question_at_100(tmp_path, fake_llm):
    asked: list[str] = []
    answers = [False, True]

    async def confirm(text: str) -> bool:
        asked.append(text)
        return answers.pop(0)

    config = "[budget]\nsession_cost_limit = 1.0\n"
    async with turns(tmp_path, fake_llm, config, confirm) as (ws, orch):
        await _spend(ws, 0.80, purpose="summary")  # background calls count
        fake_llm.enqueue(Reply(text="first"))
        events = []
        assert (await orch.run_turn("one", events.append)).error is None
        [warn] = [e.text for e in events if isinstance(e, Notice) and "Spending" in e.text]
        assert "80 % of the $1.00 limit" in warn and "$0.80 of it background calls" in warn
        await _spend(ws, 0.30)
        # At 100 %: asked; "no" keeps the prompt as a failed one and sends nothing.
        before = len(fake_llm.chat_requests)
        events = []
        out = await orch.run_turn("two", events.append)
        assert len(asked) == 1 and "110 % of the $1.00 limit" in asked[0]
        assert out.error.startswith("Not sent: This session has cost $1.10")
        assert [e.error_kind for e in events if isinstance(e, ErrorEvent)] == ["budget"]
        assert len(fake_llm.chat_requests) == before
        assert "two" in [m.content for m in await ws.ledger.session_messages(ws.session)]
        # "yes" sends it.
        fake_llm.enqueue(Reply(text="third"))
        assert (await orch.run_turn("three")).error is None
        assert len(asked) == 2 and fake_llm.last_chat.messages[-1]["content"].endswith("three")


def test_headless_ask_refuses_over_the_daily_limit(tmp_path, fake_llm):
    from tests.test_cli import run

    (tmp_path / "user.toml").write_text("[budget]\ndaily_cost_limit = 0.001\n")
    env = env_for(fake_llm, SLOP_CONFIG=str(tmp_path / "user.toml"))
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path.parent)
    fake_llm.enqueue(Reply(text="fine", prompt_tokens=20_000, completion_tokens=10))
    first = run(["ask", "first question"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    second = run(["ask", "second question"], tmp_path, env)
    assert second.returncode == 1
    assert "Not sent: Today's calls have cost $0.0030" in second.stderr
    assert "daily_cost_limit" in second.stderr and "nobody to ask (headless)" in second.stderr
    assert len(fake_llm.chat_requests) == 1


def test_bad_budget_values_are_one_line_each_and_leave_the_limit_off(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[budget]\nsession_cost_limit = -1\ndaily_cost_limit = "lots"\nmonthly = 3\n')
    config = load_config(db=str(tmp_path / "x.db"), env={"SLOP_CONFIG": str(cfg)}, cwd=tmp_path)
    assert [w.removeprefix(f"{cfg}: ") for w in config.warnings] == [
        "'budget.session_cost_limit' = -1 must be a finite number, at least 0; using the default.",
        "'budget.daily_cost_limit' has the wrong type; ignored.",
        "unknown key 'budget.monthly' ignored.",
    ]
    assert config.budget == {}


def test_an_untrusted_project_file_cannot_lower_prices_or_lift_a_budget(tmp_path, fake_llm):
    """A cloned project's config prices the model at nothing and raises the daily limit:
    neither applies until the user runs `slop-tui trust`."""
    import sqlite3

    from tests.test_cli import run

    (tmp_path / "user.toml").write_text("[budget]\ndaily_cost_limit = 0.001\n")
    (tmp_path / ".slop").mkdir()
    (tmp_path / ".slop" / "config.toml").write_text(
        '[prices."gpt-4o-mini"]\ninput = 0\noutput = 0\n[budget]\ndaily_cost_limit = 100\n'
    )
    env = env_for(fake_llm, SLOP_CONFIG=str(tmp_path / "user.toml"))
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path.parent)
    fake_llm.enqueue(Reply(text="fine", prompt_tokens=20_000, completion_tokens=10))
    first = run(["ask", "first question"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    assert (
        "ignored [prices.'gpt-4o-mini'], [budget] daily_cost_limit = 100 (yours is 0.001): "
        "this folder is not trusted" in first.stderr
    )

    def costs() -> list[tuple[float, str]]:
        with contextlib.closing(sqlite3.connect(tmp_path / ".slop" / "slop.db")) as db:
            return db.execute("SELECT cost_total, price_source FROM usage ORDER BY id").fetchall()

    [(cost, source)] = costs()
    assert source == "genai-prices" and cost == pytest.approx(mini_cost(20_000, 0, 10))
    refused = run(["ask", "second question"], tmp_path, env)
    assert refused.returncode == 1 and "daily_cost_limit" in refused.stderr
    assert len(fake_llm.chat_requests) == 1

    trusted = run(["trust"], tmp_path, env)
    assert trusted.returncode == 0, trusted.stderr
    assert "[budget] daily_cost_limit = 100" in trusted.stdout
    fake_llm.enqueue(Reply(text="fine", prompt_tokens=20_000, completion_tokens=10))
    third = run(["ask", "third question"], tmp_path, env)
    assert third.returncode == 0, third.stderr
    assert costs()[-1] == (0.0, "config") and len(fake_llm.chat_requests) == 2


def test_a_project_file_may_tighten_a_budget_without_trust():
    from slop_tui.trust import sensitive

    project = {"budget": {"session_cost_limit": 2.0, "daily_cost_limit": 9.0}}
    kept, dropped = sensitive(project, "reads", {"daily_cost_limit": 5.0})
    assert kept["budget"] == {"session_cost_limit": 2.0}  # a limit the user did not set
    assert dropped == ["[budget] daily_cost_limit = 9.0 (yours is 5.0)"]
    kept, dropped = sensitive(project, "reads", {"session_cost_limit": 3, "daily_cost_limit": 9})
    assert kept["budget"] == project["budget"] and dropped == []
    kept, dropped = sensitive({"prices": {"m": {"input": 0, "output": 0}}}, "reads")
    assert "prices" not in kept and dropped == ["[prices.m]"]


async def test_clearing_or_trashing_history_never_lowers_the_days_spend(tmp_path, fake_llm):
    """The day's spend is every call made: `/session clear`, `/session remove` and
    `/trash empty` take the history away, not the money. The session's own figure
    follows its history (a cleared session starts again from $0.00, as a new one)."""
    import datetime as dt

    asked: list[str] = []

    async def confirm(text: str) -> bool:
        asked.append(text)
        return False

    config = "[budget]\ndaily_cost_limit = 1.0\n"
    async with turns(tmp_path, fake_llm, config, confirm) as (ws, orch):
        await _spend(ws, 0.60)
        await _spend(ws, 0.50, purpose="summary")
        over = await ws.budget_check()
        assert over.level == BUDGET_OVER
        assert over.text.startswith(
            "Today's calls have cost $1.10 ($0.50 of it background calls), 110 %"
        )
        today = dt.date.today().isoformat()
        day_row = f"| {today} | 2 | $1.10 | $0.00 |"

        cleared = (await dispatch(ws, "/session clear")).data
        assert (await ws.ledger.spend(ws.session)).calls == 0  # the session's history
        assert (await ws.budget_check()).text == over.text  # the day's calls
        stats = (await dispatch(ws, "/stats")).text
        assert "No usage recorded yet." in stats and day_row in stats
        out = await orch.run_turn("after the clear")
        assert out.error.startswith("Not sent: Today's calls have cost $1.10") and asked
        assert fake_llm.chat_requests == []

        await dispatch(ws, f"/trash restore {cleared.id}")
        assert (await ws.ledger.spend(ws.session)).cost == pytest.approx(1.10)
        await dispatch(ws, "/session clone twin")  # a copy of the calls, not new calls
        assert day_row in (await dispatch(ws, "/stats")).text
        await dispatch(ws, "/session remove twin")
        await dispatch(ws, "/session clear")
        await dispatch(ws, "/trash empty --yes")
        day = await ws.ledger.spend_per_day()
        assert [(k, s.calls, round(s.cost, 2)) for k, s in day] == [(today, 2, 1.10)]
        assert (await ws.budget_check()).text == over.text


async def test_an_older_ledger_fills_the_spend_log_from_its_calls(tmp_path):
    """Upgrading a ledger writes one spend row per call its usage table holds: a row
    copied with its session (same call, same time) counts once."""
    import sqlite3

    from slop_tui.ledger import Ledger
    from slop_tui.ledger.schema import MIGRATIONS
    from tests.workspace_fixtures import migrate_to

    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as con:
        # The ledger as it was before the migration that adds `spend_log`.
        adds_log = [any("CREATE TABLE spend_log" in stmt for stmt in m) for m in MIGRATIONS]
        migrate_to(con, adds_log.index(True))
        con.executemany(
            "INSERT INTO sessions(name, created_at, updated_at) VALUES (?, 1, 1)",
            [("a",), ("copy",)],
        )
        rows = [("a", 0.25, 100.0), ("copy", 0.25, 100.0), ("a", None, 200.0)]
        con.executemany(
            "INSERT INTO usage(session_id, provider, model, prompt_tokens, completion_tokens, "
            "cost_total, cost_saved, created_at) VALUES (?, 'openai', 'm', 10, 1, ?, 0, ?)",
            rows,
        )
        con.commit()
    led = await Ledger.open(path, count_tokens=len)
    try:
        spent = await led.spend_since(0)
        assert (spent.calls, spent.cost, spent.unpriced) == (2, 0.25, 1)
    finally:
        await led.close()


HOUSE_PRICE = '[prices."house-model-7"]\ninput = 1.0\noutput = 2.0\n'


async def _unknown_then_priced_rows(tmp_path, fake_llm) -> None:
    """A session with one call of an unpriced model, and one of the same model that had
    a price (set by an override of the time)."""
    async with turns(tmp_path, fake_llm, model="house-model-7") as (ws, orch):
        fake_llm.enqueue(Reply(text="ok", prompt_tokens=1000, completion_tokens=10))
        assert (await orch.run_turn("hello")).error is None
        assert (await ws.ledger.last_usage(ws.session)).cost is None
        await ws.ledger.record_usage(
            ws.session,
            None,
            "openai",
            "house-model-7",
            50,
            5,
            cost=UsageCost(0.5, 0, 0, 0, 0, "config"),
        )
        await ws.current()
        assert ws.cost_label() == "$0.50 + 1 call price unknown"


async def test_a_later_override_prices_the_calls_that_had_no_price(tmp_path, fake_llm):
    await _unknown_then_priced_rows(tmp_path, fake_llm)
    async with turns(tmp_path, fake_llm, HOUSE_PRICE, model="house-model-7") as (ws, _):
        assert ws.pop_warnings() == [
            "[prices] priced 1 earlier call that had no price (house-model-7)."
        ]
        first, kept = sorted(await ws.ledger.recent_usage(ws.session), key=lambda u: u.id)
        assert first.cost is not None and first.cost.source == "config"
        assert first.cost.total == pytest.approx((1000 * 1.0 + 10 * 2.0) / 1e6)
        assert kept.cost.total == 0.5  # a call that had a price keeps it
        await ws.current()
        assert ws.cost_label() == format_usd(0.5 + first.cost.total)
        stats = (await dispatch(ws, "/stats")).text
        assert PRICE_UNKNOWN not in stats
        [(_, day)] = await ws.ledger.spend_per_day()
        assert day.unpriced == 0 and day.cost == pytest.approx(0.5 + first.cost.total)
    # Priced once: opening again changes nothing and says nothing.
    async with turns(tmp_path, fake_llm, HOUSE_PRICE, model="house-model-7") as (ws, _):
        assert ws.pop_warnings() == []


@pytest.mark.parametrize(
    "entry",
    [
        "input = -1.0\noutput = 2.0",
        'input = "cheap"\noutput = 2.0',
        'input = 1\noutput = 2\ncurrency = "EUR"',
    ],
)
async def test_a_bad_later_override_prices_nothing(tmp_path, fake_llm, entry):
    await _unknown_then_priced_rows(tmp_path, fake_llm)
    config = f'[prices."house-model-7"]\n{entry}\n'
    async with turns(tmp_path, fake_llm, config, model="house-model-7") as (ws, _):
        [line] = [w for w in ws.config.warnings if "prices" in w]
        assert "this price is ignored." in line and ws.pop_warnings() == []
        rows = await ws.ledger.recent_usage(ws.session)
        assert sorted(u.cost.total if u.cost else None for u in rows if u.cost) == [0.5]
        await ws.current()
        assert ws.cost_label() == "$0.50 + 1 call price unknown"


async def test_a_reloaded_config_prices_the_calls_that_had_no_price(tmp_path, fake_llm):
    """The workspace's trust action reloads the config: the new override applies at the
    next read of the session."""
    await _unknown_then_priced_rows(tmp_path, fake_llm)
    async with turns(tmp_path, fake_llm, model="house-model-7") as (ws, _):
        (tmp_path / "user.toml").write_text(HOUSE_PRICE)
        ws.reconfigure(
            load_config(
                db=str(ws.config.db_path),
                env=env_for(fake_llm, SLOP_CONFIG=str(tmp_path / "user.toml")),
                cwd=tmp_path,
            )
        )
        await ws.current()
        assert PRICE_UNKNOWN not in ws.cost_label()


async def test_a_later_override_prices_trashed_calls_too(tmp_path, fake_llm):
    await _unknown_then_priced_rows(tmp_path, fake_llm)
    async with turns(tmp_path, fake_llm, model="house-model-7") as (ws, _):
        cleared = (await dispatch(ws, "/session clear")).data
    async with turns(tmp_path, fake_llm, HOUSE_PRICE, model="house-model-7") as (ws, _):
        [(_, day)] = await ws.ledger.spend_per_day()
        assert day.unpriced == 0 and day.calls == 2
        await dispatch(ws, f"/trash restore {cleared.id}")
        rows = await ws.ledger.recent_usage(ws.session)
        assert len(rows) == 2 and all(u.cost is not None for u in rows)
