"""Model limits, compaction settings and the token budget of a request (seed 003).

- `ModelInfo`: a model's context window and output limit. `model_info` looks
  a model up in config overrides (`[models.NAME] context_window = …,
  max_output = …`), then in the built-in table (longest matching prefix, so
  `gpt-4.1-mini-2025-04-14` finds `gpt-4.1-mini`), then falls back to
  128,000 / 16,384.
- `CompactionSettings`: the `[compaction]` table: after-reply compaction
  (seed 003), the guard ladder (seed 004) and the lane summaries (seed 002).
- `budget_report`: what the gauge and `/context budget` show.

The input budget is the window minus the output reserve: every percentage
here and in `guards.py` is a share of `max_input_tokens`, not of the raw
window, so a request at 100 % still leaves room for a full-length answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from slop_tui.context.prompt import Prompt

DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_OUTPUT = 16_384


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A model's limits in tokens; `source` says where they came from."""

    name: str
    context_window: int
    max_output: int
    source: str = "table"  # "config" | "table" | "default"

    @property
    def max_input_tokens(self) -> int:
        return max(1, self.context_window - self.max_output)

    @property
    def max_history_tokens(self) -> int:
        """Aider's history budget: a sixteenth of the input budget."""
        return self.max_input_tokens // 16


# (prefix, context window, max output). Longest prefix wins; names are lower-cased
# and stripped of a provider path ("models/gemini-2.5-pro", "openai/gpt-4o").
MODEL_TABLE: tuple[tuple[str, int, int], ...] = (
    # OpenAI
    ("gpt-4o", 128_000, 16_384),
    ("gpt-4o-mini", 128_000, 16_384),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4.1-mini", 1_047_576, 32_768),
    ("gpt-4.1-nano", 1_047_576, 32_768),
    ("gpt-4-turbo", 128_000, 4_096),
    ("gpt-4", 8_192, 4_096),
    ("gpt-4.5", 128_000, 16_384),
    ("gpt-3.5-turbo", 16_385, 4_096),
    ("gpt-5", 400_000, 128_000),
    ("gpt-5-chat", 128_000, 16_384),
    ("o1", 200_000, 100_000),
    ("o3", 200_000, 100_000),
    ("o4-mini", 200_000, 100_000),
    ("chatgpt-4o", 128_000, 16_384),
    # Google
    ("gemini-1.5-pro", 2_097_152, 8_192),
    ("gemini-1.5-flash", 1_048_576, 8_192),
    ("gemini-2.0-flash", 1_048_576, 8_192),
    ("gemini-2.5-flash", 1_048_576, 65_536),
    ("gemini-2.5-pro", 1_048_576, 65_536),
    ("gemini-3", 1_048_576, 65_536),
    ("gemma-3", 131_072, 8_192),
    # Open models (common Ollama / vLLM names)
    ("llama3", 8_192, 2_048),
    ("llama-3", 8_192, 2_048),
    ("llama3.1", 131_072, 8_192),
    ("llama3.2", 131_072, 8_192),
    ("llama3.3", 131_072, 8_192),
    ("llama-3.1", 131_072, 8_192),
    ("llama-3.2", 131_072, 8_192),
    ("llama-3.3", 131_072, 8_192),
    ("llama4", 1_048_576, 16_384),
    ("qwen", 32_768, 8_192),
    ("qwen2.5", 32_768, 8_192),
    ("qwen3", 40_960, 8_192),
    ("mistral", 32_768, 8_192),
    ("mistral-large", 131_072, 8_192),
    ("mistral-nemo", 131_072, 8_192),
    ("mixtral", 32_768, 8_192),
    ("deepseek", 65_536, 8_192),
    # The offline demo model: small on purpose, so the gauge and guards move.
    ("slop-demo", 32_768, 4_096),
)


def _normal(name: str) -> str:
    return name.strip().lower().rsplit("/", 1)[-1]


def _longest_prefix(name: str, prefixes: list[str]) -> str | None:
    hits = [p for p in prefixes if name.startswith(p)]
    return max(hits, key=len) if hits else None


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return value


def _override(name: str, spec: object) -> dict[str, int]:
    if not isinstance(spec, Mapping):
        raise ValueError(f"[models.{name}] must be a table, got {type(spec).__name__}")
    # `vision` (whether the model reads images) is read by the images layer.
    unknown = sorted(set(spec) - {"context_window", "max_output", "vision"})
    if unknown:
        raise ValueError(
            f"[models.{name}]: unknown key(s) {', '.join(unknown)}; "
            "expected context_window, max_output and/or vision"
        )
    if "vision" in spec and not isinstance(spec["vision"], bool):
        raise ValueError(f"[models.{name}] vision must be true or false")
    return {k: _positive_int(v, f"[models.{name}] {k}") for k, v in spec.items() if k != "vision"}


def model_info(model: str, overrides: Mapping[str, Any] | None = None) -> ModelInfo:
    """Limits of `model`: config override, else the table (longest prefix), else the default.

    An override may set one of the two values; the other comes from the table.
    Override names match exactly first, then as prefixes. Bad overrides raise
    ValueError (unknown key, non-positive value, output not below the window).
    """
    name = _normal(model)
    base_window, base_output, source = DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT, "default"
    prefix = _longest_prefix(name, [p for p, _, _ in MODEL_TABLE])
    if prefix is not None:
        _, base_window, base_output = next(row for row in MODEL_TABLE if row[0] == prefix)
        source = "table"
    window, output = base_window, base_output
    if overrides:
        by_name = {_normal(k): (k, v) for k, v in overrides.items()}
        key = name if name in by_name else _longest_prefix(name, list(by_name))
        if key is not None:
            raw_name, spec = by_name[key]
            values = _override(raw_name, spec)
            window = values.get("context_window", window)
            output = values.get("max_output", output)
            if "max_output" not in values:
                output = min(output, window // 2)  # a smaller window keeps room for input
            source = "config"
    if output >= window:
        raise ValueError(
            f"model {model}: max_output ({output}) must be smaller than context_window ({window})"
        )
    return ModelInfo(model, window, output, source)


# `[compaction]` keys that were removed: a config that still has one gets a one-line
# warning and the rest of its table is used.
REMOVED_SETTINGS = {
    "unsummarized": (
        "rows that left the window are never sent now, only listed in one line until a "
        "summary covers them (the strict window; sending them short cost more "
        "tokens for no more answerable facts, docs/context.md §5.11)"
    ),
}


def removed_settings(data: Mapping[str, object]) -> tuple[dict[str, object], list[str]]:
    """`data` without the removed `[compaction]` keys, and one warning per key found."""
    kept = {k: v for k, v in data.items() if k not in REMOVED_SETTINGS}
    warnings = [
        f"[compaction] {key} is gone and ignored: {why}."
        for key, why in REMOVED_SETTINGS.items()
        if key in data
    ]
    return kept, warnings


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """Config table `[compaction]`; see docs/context.md.

    After-reply compaction (seed 003): `enabled`, `compaction_trigger_tokens`,
    `verbatim_window_tokens`, `summary_budget_tokens`, `min_verbatim_exchanges`,
    `detector_model` / `summary_model` ("" = the session's model).
    Guards before every request (seed 004): `warn_pct`, `reduce_pct`,
    `removal_levels`, `keep_recent_messages`, `min_shrink_pct`.
    Lane summaries: the rows that left the window are not sent (the strict
    window): the summary layer lists them in one line with the
    `query_db` query that reads them until a summary covers them; one is due past
    `lane_max_messages`, `lane_max_tokens` (in their short form) or
    `lane_max_age_hours` since the last (`context.plan`). `lane_max_anchors` caps
    the rolled summary's anchors (the user's constraints and decisions beyond it).
    `session_summary` (an optional per-session summary, off by default)
    keeps one more rolling summary: an overview of the session's lanes, made from
    their summaries and sent in every lane's summary layer. `lane_keep_recent` and
    `lane_min_messages` are accepted for old configs and not used. The current
    turn's own message is cut to `own_message_max_pct` of the input budget when
    it alone is longer (0 = never). Handoff checkpoints every
    `checkpoint_interval` tool-loop iterations (0 = off).
    """

    enabled: bool = True
    compaction_trigger_tokens: int = 24_000
    verbatim_window_tokens: int = 4_000
    summary_budget_tokens: int = 500
    min_verbatim_exchanges: int = 2
    keep_recent_messages: int = 10
    warn_pct: int = 80
    reduce_pct: int = 90
    removal_levels: tuple[int, ...] = (0, 10, 20, 50, 100)
    min_shrink_pct: int = 5
    detector_model: str = ""
    summary_model: str = ""
    lane_max_messages: int = 30
    lane_max_tokens: int = 2_500
    lane_max_age_hours: float = 24.0
    lane_keep_recent: int = 0
    lane_min_messages: int = 6
    lane_max_anchors: int = 80
    own_message_max_pct: int = 50
    checkpoint_interval: int = 5
    session_summary: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("enabled", "session_summary"):
                if not isinstance(value, bool):
                    raise ValueError(f"compaction.{f.name} must be true or false, got {value!r}")
            elif f.name in ("detector_model", "summary_model"):
                if not isinstance(value, str):
                    raise ValueError(f"compaction.{f.name} must be a string, got {value!r}")
            elif f.name == "removal_levels":
                self._check_levels(value)
            elif f.name == "lane_max_age_hours":
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise ValueError(
                        f"compaction.lane_max_age_hours must be a number >= 0, got {value!r}"
                    )
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"compaction.{f.name} must be an integer >= 0, got {value!r}")
        if not 0 < self.warn_pct <= self.reduce_pct <= 100:
            raise ValueError(
                "compaction: need 0 < warn_pct <= reduce_pct <= 100, "
                f"got warn_pct={self.warn_pct}, reduce_pct={self.reduce_pct}"
            )
        if self.own_message_max_pct > 100:
            raise ValueError(
                f"compaction.own_message_max_pct must be <= 100, got {self.own_message_max_pct}"
            )
        if self.min_shrink_pct > 100:
            raise ValueError(f"compaction.min_shrink_pct must be <= 100, got {self.min_shrink_pct}")

    @staticmethod
    def _check_levels(value: object) -> None:
        ok = (
            isinstance(value, tuple)
            and value
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            and all(0 <= v <= 100 for v in value)
            and list(value) == sorted(set(value))
        )
        if not ok:
            raise ValueError(
                "compaction.removal_levels must be increasing percentages 0..100, "
                f"e.g. [0, 10, 20, 50, 100]; got {value!r}"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> CompactionSettings:
        """Build from the `[compaction]` table; unknown keys and bad values raise ValueError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown compaction setting(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(sorted(known))}"
            )
        values = dict(data)
        levels = values.get("removal_levels")
        if isinstance(levels, list):
            values["removal_levels"] = tuple(levels)
        return cls(**values)  # type: ignore[arg-type]  # __post_init__ validates types

    @property
    def target_pct(self) -> float:
        """Where reduction aims: 80 % of the reduce threshold (seed 004), 72 % by default."""
        return self.reduce_pct * 0.8


LEVEL_OK = "ok"
LEVEL_WARNING = "warning"
LEVEL_CRITICAL = "critical"


def usage_level(tokens: int, max_input: int, settings: CompactionSettings) -> str:
    """ok below warn_pct of the input budget, warning from there, critical from reduce_pct."""
    if tokens * 100 >= settings.reduce_pct * max_input:
        return LEVEL_CRITICAL
    if tokens * 100 >= settings.warn_pct * max_input:
        return LEVEL_WARNING
    return LEVEL_OK


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """The budget of one request (the gauge and `/context budget`)."""

    model: str
    history_tokens: int
    max_history_tokens: int  # max input / 16 (aider's history budget)
    max_input_tokens: int  # context window - max output
    total_tokens: int  # the whole request: system text, messages, tool declarations
    remaining: int  # max input - total (negative when over)
    percent: float  # total as a share of max input, one decimal
    needs_summary: bool  # history above compaction_trigger_tokens (and compaction enabled)
    level: str  # "ok" | "warning" | "critical"
    context_window: int = 0
    max_output: int = 0

    def line(self) -> str:
        """One line for the gauge, e.g. `12,345 / 111,616 tokens (11.1 %) · ok`."""
        tail = " · summary due" if self.needs_summary else ""
        return (
            f"{self.total_tokens:,} / {self.max_input_tokens:,} tokens "
            f"({self.percent:.1f} %) · {self.level}{tail}"
        )


def budget_report(
    prompt: Prompt, info: ModelInfo, settings: CompactionSettings | None = None
) -> BudgetReport:
    """The budget of `prompt` for the model `info`."""
    settings = settings or CompactionSettings()
    max_input = info.max_input_tokens
    total = prompt.request_tokens
    history = prompt.history_tokens
    return BudgetReport(
        model=info.name,
        history_tokens=history,
        max_history_tokens=info.max_history_tokens,
        max_input_tokens=max_input,
        total_tokens=total,
        remaining=max_input - total,
        percent=round(total * 100 / max_input, 1),
        needs_summary=settings.enabled and history > settings.compaction_trigger_tokens,
        level=usage_level(total, max_input, settings),
        context_window=info.context_window,
        max_output=info.max_output,
    )
