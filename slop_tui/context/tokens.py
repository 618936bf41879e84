"""Token counting: exact o200k_base counts offline, calibrated estimates elsewhere.

tiktoken's own `get_encoding("o200k_base")` downloads its rank file on first
use, and the app must work without network access. So the rank file ships as
package data (slop_tui/data/o200k_base.tiktoken.gz, provenance in
slop_tui/data/README.md) and the `Encoding` is built here from it.

Building it costs ~0.5 s, so it happens lazily, once, under a lock; UI code
should warm it from a worker (`get_encoding()`) and use `estimate()` while
typing. If the encoding cannot be built, every count falls back to
`len(text) // 4` and `encoding_error()` says why.

Pure: no network, no Textual, no provider SDK. tiktoken is imported only
inside the loader, so importing this module is cheap.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "O200K_PAT_STR",
    "O200K_SHA256",
    "O200K_SPECIAL_TOKENS",
    "OPENAI_MODEL_PREFIXES",
    "TokenCounter",
    "chars_estimate",
    "default_counter",
    "encoding_error",
    "encoding_loaded",
    "get_encoding",
    "is_openai_model",
]

# SHA-256 of the *decompressed* rank file; identical to the expected_hash in
# tiktoken_ext/openai_public.py, so a match means "the same ranks tiktoken uses".
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# Copied verbatim from tiktoken 0.14.0 tiktoken_ext/openai_public.py (o200k_base)
# rather than read from there at run time: fetching it means calling
# openai_public.o200k_base(), which triggers the download we are avoiding.
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
O200K_SPECIAL_TOKENS: dict[str, int] = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

_DATA_PACKAGE = "slop_tui"
_DATA_DIR = "data"
_DATA_FILE = "o200k_base.tiktoken.gz"

OPENAI_MODEL_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt", "text-embedding")

FACTOR_MIN = 0.5
FACTOR_MAX = 2.0
LEARN_ALPHA = 0.3
# Small prompts are dominated by per-request framing tokens the provider adds,
# so their ratio says little about the tokenizer and would jerk the factor.
LEARN_MIN_REPORTED = 50


def _read_data() -> bytes:
    return (resources.files(_DATA_PACKAGE) / _DATA_DIR / _DATA_FILE).read_bytes()


def _build_encoding(compressed: bytes) -> tiktoken.Encoding:
    import tiktoken

    raw = gzip.decompress(compressed)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise ValueError(f"{_DATA_FILE}: sha256 {digest} does not match {O200K_SHA256}")
    # Each line is "<base64 token> <rank>". Splitting the whole buffer at once and
    # decoding with binascii is ~20% faster than tiktoken's per-line loop, and the
    # hash check above already guarantees the layout.
    parts = raw.split()
    ranks = dict(zip(map(binascii.a2b_base64, parts[0::2]), map(int, parts[1::2]), strict=True))
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=O200K_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=dict(O200K_SPECIAL_TOKENS),
    )


@dataclass
class _EncodingState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    loaded: bool = False
    encoding: tiktoken.Encoding | None = None
    error: str | None = None


_state = _EncodingState()


def get_encoding() -> tiktoken.Encoding | None:
    """The o200k_base encoding, or None if it could not be built.

    The first call builds it (~0.5 s) and blocks concurrent callers until
    done; later calls are a field read.
    """
    state = _state
    if not state.loaded:
        with state.lock:
            if not state.loaded:
                try:
                    state.encoding = _build_encoding(_read_data())
                except Exception as exc:  # any failure must degrade to estimates, not crash the UI
                    state.encoding = None
                    state.error = f"{type(exc).__name__}: {exc}"
                state.loaded = True
    return state.encoding


def encoding_error() -> str | None:
    """Why exact counts are unavailable, or None if the encoding loaded. Loads if needed."""
    get_encoding()
    return _state.error


def encoding_loaded() -> bool:
    """True once a load attempt has finished (successfully or not); never blocks."""
    return _state.loaded


def chars_estimate(text: str) -> int:
    """`len(text) // 4`, but at least 1 for non-empty text."""
    if not text:
        return 0
    return max(1, len(text) // 4)


def is_openai_model(model: str | None) -> bool:
    """Whether `model` tokenizes with o200k_base; None means "assume it does"."""
    if model is None:
        return True
    # Routers prefix the vendor ("openai/gpt-4o"); only the last segment names the model.
    name = model.strip().lower().rsplit("/", 1)[-1]
    return name.startswith(OPENAI_MODEL_PREFIXES)


def _clamp_factor(value: float) -> float:
    if not math.isfinite(value):
        return 1.0
    return min(FACTOR_MAX, max(FACTOR_MIN, value))


class TokenCounter:
    """Counts tokens for one model.

    OpenAI-family models (and `model=None`) get exact o200k_base counts. Other
    models get the o200k count scaled by `factor`, a correction learned from
    the prompt token counts the provider reports (`learn`). The caller owns
    persistence: read `factor`, store it, pass it back to the constructor.
    """

    def __init__(self, model: str | None = None, factor: float = 1.0) -> None:
        self.model = model
        self._openai = is_openai_model(model)
        self._factor = _clamp_factor(float(factor))
        self._factor_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TokenCounter(model={self.model!r}, factor={self._factor:.4f})"

    @property
    def factor(self) -> float:
        return self._factor

    @property
    def is_exact(self) -> bool:
        """True when `count` is exact: an OpenAI-family model and the encoding loaded.

        Loads the encoding if needed.
        """
        return self._openai and get_encoding() is not None

    def base_count(self, text: str) -> int:
        """Uncorrected count: o200k tokens, or `len // 4` without the encoding.

        This is the `estimated` value `learn` expects.
        """
        if not text:
            return 0
        encoding = get_encoding()
        if encoding is None:
            return chars_estimate(text)
        # encode_ordinary: "<|endoftext|>" in user text is just text, and must not raise.
        return len(encoding.encode_ordinary(text))

    def count(self, text: str) -> int:
        """Tokens in `text`: exact for OpenAI models, `base_count * factor` otherwise."""
        base = self.base_count(text)
        if base == 0 or self.is_exact:
            return base
        return max(1, round(base * self._factor))

    def count_many(self, texts: Iterable[str]) -> list[int]:
        return [self.count(text) for text in texts]

    def estimate(self, text: str) -> int:
        """`len(text) // 4`: constant time, for live typing and streaming."""
        return chars_estimate(text)

    def learn(self, estimated: int, reported: int) -> float:
        """Move `factor` toward `reported / estimated`; returns the new factor.

        `estimated` is `base_count()` of exactly what was sent, `reported` the
        provider's prompt token count for it. Reports under 50 tokens are ignored.
        """
        if estimated <= 0 or reported < LEARN_MIN_REPORTED:
            return self._factor
        # Clamping the target (not only the result) keeps one wild report from
        # swinging the factor to a bound in a single step.
        target = _clamp_factor(reported / estimated)
        with self._factor_lock:
            blended = (1 - LEARN_ALPHA) * self._factor + LEARN_ALPHA * target
            self._factor = _clamp_factor(blended)
            return self._factor


_default_counter = TokenCounter(None)


def default_counter() -> TokenCounter:
    """A shared counter for `model=None` (exact o200k counts)."""
    return _default_counter
