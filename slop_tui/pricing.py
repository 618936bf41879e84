"""What a model call cost in money (USD), from the provider-reported token counts.

Prices come from `genai-prices` (pydantic's maintained table of LLM prices:
OpenAI, Google, Anthropic, OpenRouter's catalogue and dozens more, historic
and timestamp-aware). Its data is compiled into the installed package, so a
price lookup never touches the network; its opt-in `UpdatePrices` fetcher is
never started here. `[prices]` in config.toml overrides or adds a model (a
private endpoint, a model newer than the installed table).

A price goes by the model's name and the kind of provider, whatever the base
URL: a gpt-4o-mini served through a proxy costs what gpt-4o-mini costs. The
lookup tries, in order: an override for the exact model name; the table's
provider for the endpoint (OpenRouter by its host, Google for a Gemini
provider, OpenAI for the official API); any provider whose models match the
name; for a `vendor/model` name, the vendor's own provider with `model`. A
model found nowhere has no price: `price_call` returns None and the caller
says "price unknown", never a figure. The offline demo costs nothing.

Parts of a call's cost (`records.UsageCost`): uncached input, cached input, output,
reasoning (reasoning tokens are billed at the output rate and are part of the
reported output), and `saved`: what the cached input would have cost
uncached, minus what it cost.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from slop_tui.records import Spend, UsageCost

CURRENCY = "USD"
PER = 1_000_000  # prices are per million tokens
SOURCE_TABLE = "genai-prices"
SOURCE_CONFIG = "config"
SOURCE_DEMO = "demo"
PRICE_UNKNOWN = "price unknown"
_OVERRIDE_KEYS = {"input", "cached_input", "output", "currency"}


@dataclass(frozen=True, slots=True)
class Rates:
    """A `[prices]` override: USD per million tokens. `cached_input` None: cached
    input is billed at the input rate (no discount is assumed)."""

    input: float
    output: float
    cached_input: float | None = None


def parse_overrides(table: Mapping[str, Any]) -> tuple[dict[str, Rates], list[str]]:
    """The valid `[prices.MODEL]` overrides, and one line per entry that is left out.

    An entry is left out whole when a value is negative, not a finite number, a
    required rate (`input`, `output`) is missing, a key is unknown, or its
    currency is not USD: that model then costs what the table says, or has no price.
    """
    rates: dict[str, Rates] = {}
    errors: list[str] = []
    for model, entry in table.items():
        where = f"[prices.{model!r}]" if not str(model).isidentifier() else f"[prices.{model}]"
        if not isinstance(entry, Mapping):
            errors.append(f"{where} must be a table (input, output, cached_input); ignored.")
            continue
        problem = _override_problem(entry)
        if problem:
            errors.append(f"{where} {problem}; this price is ignored.")
            continue
        cached = entry.get("cached_input")
        rates[str(model)] = Rates(
            float(entry["input"]), float(entry["output"]), None if cached is None else float(cached)
        )
    return rates, errors


def _override_problem(entry: Mapping[str, Any]) -> str | None:
    unknown = sorted(set(entry) - _OVERRIDE_KEYS)
    if unknown:
        return f"has unknown key(s) {', '.join(unknown)} (expected input, output, cached_input, currency)"
    currency = entry.get("currency", CURRENCY)
    if currency != CURRENCY:
        return f"currency {currency!r} is not supported (prices are in {CURRENCY})"
    for key in ("input", "output"):
        if key not in entry:
            return f"needs {key} (USD per million tokens)"
    for key in ("input", "output", "cached_input"):
        if key not in entry:
            continue
        value = entry[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            return f"{key} = {value!r} is not a number of USD per million tokens"
        if value < 0:
            return f"{key} = {value!r} is negative"
    return None


def _endpoint_provider(kind: str, base_url: str | None) -> str | None:
    """The table's provider id for a configured endpoint; None: decide by the model name."""
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    if kind in ("gemini", "gemini_gca"):
        return "google"
    if kind == "openai" and (not host or host == "api.openai.com"):
        return "openai"
    return None


@functools.cache
def _snapshot():
    # The bundled data only (the package's import takes about a second: done once,
    # off the start path, when the first call is priced).
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


@functools.cache
def _table_model(provider_id: str | None, model: str):
    """(provider, model info) from the table, or None when no provider has the model."""
    snapshot = _snapshot()
    tries: list[tuple[str | None, str]] = []
    if provider_id is not None:
        tries.append((provider_id, model))
    tries.append((None, model))
    vendor, _, rest = model.partition("/")
    if rest:
        tries += [(vendor, rest), ("openrouter", model)]
    for pid, ref in tries:
        try:
            return snapshot.find_provider_model(ref, None, pid, None)
        except LookupError:
            continue
    return None


def table_has(model: str, kind: str = "openai", base_url: str | None = None) -> bool:
    """Whether the installed table prices `model` for such an endpoint."""
    return _table_model(_endpoint_provider(kind, base_url), model) is not None


def price_call(
    *,
    model: str,
    kind: str,
    base_url: str | None,
    prompt_tokens: int,
    cached_tokens: int,
    completion_tokens: int,
    reasoning_tokens: int = 0,
    overrides: Mapping[str, Rates] | None = None,
    at: datetime | None = None,
) -> UsageCost | None:
    """The cost of one call, or None when the model has no known price."""
    if kind == "demo":
        return UsageCost(0.0, 0.0, 0.0, 0.0, 0.0, SOURCE_DEMO)
    cached = max(0, min(cached_tokens, prompt_tokens))
    reasoning = max(0, min(reasoning_tokens, completion_tokens))
    fresh, answer = prompt_tokens - cached, completion_tokens - reasoning
    rates = (overrides or {}).get(model)
    if rates is not None:
        cached_rate = rates.input if rates.cached_input is None else rates.cached_input
        return UsageCost(
            input=fresh * rates.input / PER,
            cached=cached * cached_rate / PER,
            output=answer * rates.output / PER,
            reasoning=reasoning * rates.output / PER,
            saved=cached * (rates.input - cached_rate) / PER,
            source=SOURCE_CONFIG,
        )
    found = _table_model(_endpoint_provider(kind, base_url), model)
    if found is None:
        return None
    return _table_cost(found, prompt_tokens, cached, completion_tokens, reasoning, at)


def _table_cost(found, prompt: int, cached: int, completion: int, reasoning: int, at) -> UsageCost:
    from genai_prices import Usage
    from genai_prices.types import calc_unit_price

    provider, info = found
    when = at or datetime.now(tz=UTC)
    calc = info.calc_price(
        Usage(input_tokens=prompt, cache_read_tokens=cached, output_tokens=completion),
        provider,
        genai_request_timestamp=when,
        auto_update_timestamp=None,
    )
    prices = calc.model_price
    input_rate = getattr(prices, "input_mtok", None)
    read_rate = getattr(prices, "cache_read_mtok", None)
    if read_rate is None:
        read_rate = input_rate
    cached_cost = Decimal(0)
    full_cost = Decimal(0)
    if cached:
        cached_cost = calc_unit_price(read_rate, cached, prompt, PER)
        full_cost = calc_unit_price(input_rate, cached, prompt, PER)
    output = calc.output_price
    reasoning_cost = output * reasoning / completion if completion else Decimal(0)
    return UsageCost(
        input=float(calc.input_price - cached_cost),
        cached=float(cached_cost),
        output=float(output - reasoning_cost),
        reasoning=float(reasoning_cost),
        saved=float(full_cost - cached_cost),
        source=SOURCE_TABLE,
    )


def format_usd(value: float | None) -> str:
    """`$0.0123`, `$1.24`, or "price unknown" for None."""
    if value is None:
        return PRICE_UNKNOWN
    if value == 0:
        return "$0.00"
    if abs(value) < 0.01:
        return f"${value:.4f}"
    return f"${value:,.2f}"


def spend_text(spend: Spend) -> str:
    """`$1.24`, with what it leaves out: `$1.24 + 2 calls price unknown`."""
    text = format_usd(spend.cost) if spend.calls > spend.unpriced + spend.unreported else ""
    extra = []
    if spend.unpriced:
        extra.append(f"{spend.unpriced} call{'s' * (spend.unpriced != 1)} {PRICE_UNKNOWN}")
    if spend.unreported:
        extra.append(f"{spend.unreported} without usage")
    if not extra:
        return text or format_usd(0.0)
    return " + ".join([text, *extra]) if text else ", ".join(extra)


BUDGET_OK, BUDGET_WARN, BUDGET_OVER = "ok", "warn", "over"
BUDGET_WARN_PCT = 80


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """Where spending stands against `[budget]`: `ok`, `warn` (80 % of a limit
    reached) or `over` (a limit reached: the next turn asks first); `text` says
    which limit, in one line."""

    level: str
    text: str = ""


def check_budget(
    session: Spend,
    day: Spend,
    session_limit: float | None,
    daily_limit: float | None,
) -> BudgetCheck:
    """The stricter verdict of the two limits (None: that limit is off)."""
    worst = BudgetCheck(BUDGET_OK)
    for spend, limit, what, key in (
        (session, session_limit, "This session has", "session_cost_limit"),
        (day, daily_limit, "Today's calls have", "daily_cost_limit"),
    ):
        if limit is None:
            continue
        pct = 100.0 if limit <= 0 else 100.0 * spend.cost / limit
        if pct < BUDGET_WARN_PCT:
            continue
        level = BUDGET_OVER if pct >= 100 else BUDGET_WARN
        back = spend.background.cost if spend.background is not None else 0.0
        parts = [f"{what} cost {format_usd(spend.cost)}"]
        if back:
            parts.append(f" ({format_usd(back)} of it background calls)")
        parts.append(f", {pct:.0f} % of the {format_usd(limit)} limit ([budget] {key})")
        if not spend.complete:
            parts.append(f"; not counted: {spend_text(replace(spend, calls=0))}")
        text = "".join(parts) + "."
        if level == BUDGET_OVER or worst.level == BUDGET_OK:
            worst = BudgetCheck(level, text)
    return worst
