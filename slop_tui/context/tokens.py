"""Token counting: exact o200k_base counts offline, calibrated estimates elsewhere.

tiktoken's own `get_encoding("o200k_base")` downloads its rank file on first
use, and the app must work without network access. So the rank file ships as
package data (slop_tui/data/o200k_base.tiktoken.gz, provenance in
slop_tui/data/README.md) and the `Encoding` is built here from it.

Building it costs 0.3-0.5 s of CPU (parsing the rank file, then tiktoken's
Rust constructor, which holds the GIL) and ~46 MB, so it happens lazily,
under a lock, and never on the workspace's start path: the app builds it
from a worker for the work that counts exactly (a turn, a command) and
drops it again once the app is idle (`release_encoding`, then `trim_heap`
gives the freed pages back). Every o200k count taken is kept in a cache of
earlier counts (`count_cache()`, persisted by the workspace in the ledger);
a request is shown with `DisplayCount`, which takes exact counts from that
cache or the encoding if it is built and estimates the rest, saying so. If
the encoding cannot be built, every count falls back to `len(text) // 4`
and `encoding_error()` says why.

Memory: tiktoken keeps the parsed `{token bytes: rank}` dict (~27 MB) on the
`Encoding` only for pickling; it is dropped once the Rust side is built.
Time: with `use_rank_cache(path)` the ranks are read from a marshal file
(written at the first build, checked by its own SHA-256 and tied to the rank
file's) instead of parsed: 0.28 s instead of 0.47 s of CPU and a lower peak.

Pure: no network, no Textual, no provider SDK. tiktoken is imported only
inside the loader, so importing this module is cheap; the only files touched
are the shipped rank file and the rank cache a caller names.
"""

from __future__ import annotations

import binascii
import contextlib
import gzip
import hashlib
import marshal
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "O200K_PAT_STR",
    "O200K_SHA256",
    "O200K_SPECIAL_TOKENS",
    "OPENAI_MODEL_PREFIXES",
    "CountCache",
    "DisplayCount",
    "TokenCounter",
    "chars_estimate",
    "count_cache",
    "default_counter",
    "encoding_error",
    "encoding_loaded",
    "o200k_count",
    "encoding_ready",
    "get_encoding",
    "is_openai_model",
    "release_encoding",
    "trim_heap",
    "use_rank_cache",
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


def _parse_ranks(compressed: bytes) -> dict[bytes, int]:
    raw = gzip.decompress(compressed)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise ValueError(f"{_DATA_FILE}: sha256 {digest} does not match {O200K_SHA256}")
    # Each line is "<base64 token> <rank>". Splitting the whole buffer at once and
    # decoding with binascii is ~20% faster than tiktoken's per-line loop, and the
    # hash check above already guarantees the layout.
    parts = raw.split()
    return dict(zip(map(binascii.a2b_base64, parts[0::2]), map(int, parts[1::2]), strict=True))


def _encoding_from_ranks(ranks: dict[bytes, int]) -> tiktoken.Encoding:
    import tiktoken

    encoding = tiktoken.Encoding(
        name="o200k_base",
        pat_str=O200K_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=dict(O200K_SPECIAL_TOKENS),
    )
    # The Rust core has its own copy; the Python dict (~27 MB) only serves pickling,
    # which nothing here does (encode_ordinary and decode use the core alone).
    encoding._mergeable_ranks = {}
    return encoding


def _build_encoding(compressed: bytes) -> tiktoken.Encoding:
    ranks = _parse_ranks(compressed)
    _rank_cache.save(ranks)
    return _encoding_from_ranks(ranks)


def _load_encoding() -> tiktoken.Encoding:
    ranks = _rank_cache.load()
    if ranks is None:
        return _build_encoding(_read_data())
    return _encoding_from_ranks(ranks)


# -- the rank cache: the parsed rank file as a marshal blob -----------------------------

_RANKS_MAGIC = b"slop-tui o200k ranks v1\n"
_RANKS_COUNT = 199_998  # mergeable tokens in o200k_base (the special ones come on top)


def pack_ranks(ranks: Mapping[bytes, int]) -> bytes | None:
    """The ranks as a cache blob: magic, SHA-256 of the payload, then the payload
    (marshal of the rank file's hash and the tokens in rank order). None when the
    ranks are not exactly 0..n-1, which the compact form cannot hold."""
    tokens = list(ranks)
    if any(rank != i for i, rank in enumerate(ranks.values())):
        return None
    payload = marshal.dumps((O200K_SHA256, tokens))
    return _RANKS_MAGIC + hashlib.sha256(payload).digest() + payload


def unpack_ranks(blob: bytes) -> dict[bytes, int] | None:
    """The ranks from `pack_ranks`'s blob, or None when it is not one, is damaged or
    was made from another rank file."""
    head = len(_RANKS_MAGIC)
    if not blob.startswith(_RANKS_MAGIC) or len(blob) < head + 32:
        return None
    digest, payload = blob[head : head + 32], blob[head + 32 :]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        sha, tokens = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    if sha != O200K_SHA256 or not isinstance(tokens, list) or len(tokens) != _RANKS_COUNT:
        return None
    return dict(zip(tokens, range(len(tokens)), strict=True))


@dataclass
class _RankCache:
    """Where the marshalled ranks live (None: nowhere). Failures only cost the speed-up."""

    path: Path | None = None

    def load(self) -> dict[bytes, int] | None:
        if self.path is None:
            return None
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None
        return unpack_ranks(blob)

    def save(self, ranks: Mapping[bytes, int]) -> None:
        if self.path is None:
            return
        blob = pack_ranks(ranks)
        if blob is None:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(blob)
            os.replace(tmp, self.path)  # readers see the old file or the whole new one
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


_rank_cache = _RankCache()


def use_rank_cache(folder: Path | None) -> Path | None:
    """Keep the parsed ranks in `folder` (a user cache directory); None: do not.

    Returns the cache file. The name carries the rank file's hash, so another
    version of the ranks never reads this one.
    """
    _rank_cache.path = None if folder is None else folder / f"o200k_base-{O200K_SHA256[:16]}.ranks"
    return _rank_cache.path


@dataclass
class _EncodingState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    loaded: bool = False
    encoding: tiktoken.Encoding | None = None
    error: str | None = None
    built: bool = False  # an encoding was built once: o200k counts can be had


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
                    state.encoding = _load_encoding()
                    state.built = True
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


def encoding_ready() -> tiktoken.Encoding | None:
    """The encoding if it is built already, else None; never builds it nor blocks."""
    state = _state
    return state.encoding if state.loaded else None


def release_encoding() -> bool:
    """Drop the built encoding (~46 MB, most of it outside the Python heap); the next
    `get_encoding` builds it again. Returns whether one was dropped. A count running
    in another thread keeps its own reference until it ends. A failed build is kept
    as it is (`encoding_error` goes on saying why)."""
    state = _state
    with state.lock:
        if not state.loaded or state.encoding is None:
            return False
        state.encoding = None
        state.loaded = False
    return True


def trim_heap() -> None:
    """Give malloc's free pages back to the system (glibc's `malloc_trim`; elsewhere
    nothing). The encoding's tables are ~600,000 small allocations: freed, they stay
    in malloc's arenas until trimmed. Takes milliseconds; call it off the event loop."""
    global _malloc_trim
    if _malloc_trim is None:
        import ctypes
        import ctypes.util

        try:
            _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None  # libc's malloc_trim once looked up; False where there is none


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
        """True when `count` is exact: an OpenAI-family model and the encoding can be
        built (it was once, or is now: loads it if it never was)."""
        return self._openai and (_state.built or get_encoding() is not None)

    def base_count(self, text: str) -> int:
        """Uncorrected count: o200k tokens, or `len // 4` without the encoding.

        This is the `estimated` value `learn` expects. An o200k count is taken from
        `count_cache()` when the text was counted before, and put there when not, so
        a text counted here is shown exactly after the encoding is released.
        """
        if not text:
            return 0
        key = CountCache.key(text)
        base = _count_cache.get(key)
        if base is not None:
            return base
        encoding = get_encoding()
        if encoding is None:
            return chars_estimate(text)
        # encode_ordinary: "<|endoftext|>" in user text is just text, and must not raise.
        base = len(encoding.encode_ordinary(text))
        _count_cache.put(key, base)
        return base

    def count(self, text: str) -> int:
        """Tokens in `text`: exact for OpenAI models, `base_count * factor` otherwise."""
        base = self.base_count(text)
        if base == 0 or self.is_exact:
            return base
        return max(1, round(base * self._factor))

    def scale(self, base: int, *, exact_base: bool) -> int:
        """`count` from a base count taken elsewhere; never builds the encoding.

        `exact_base`: `base` is an o200k count (not `len // 4`), so an OpenAI
        model takes it as is; any other base is scaled by `factor`, like `count`.
        """
        if base == 0 or (exact_base and self._openai):
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


class CountCache:
    """o200k counts of texts counted before, by a digest of the text (bounded, LRU).

    A count is a function of the text alone, so a count taken in an earlier
    run stays exact: the workspace stores the counts of its last request in
    the ledger and loads them at start, and the request is then shown exactly
    without building the encoding.
    """

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._counts)

    @staticmethod
    def key(text: str) -> str:
        """The digest a text's count is stored under (32 hex digits)."""
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def get(self, key: str) -> int | None:
        with self._lock:
            n = self._counts.get(key)
            if n is not None:
                self._counts.move_to_end(key)
            return n

    def put(self, key: str, count: int) -> None:
        with self._lock:
            self._counts[key] = count
            self._counts.move_to_end(key)
            while len(self._counts) > self.limit:
                self._counts.popitem(last=False)

    def update(self, counts: Mapping[str, object]) -> int:
        """Add stored counts; entries that are not (32 hex digits, int >= 0) are
        skipped. Returns how many were taken."""
        taken = 0
        for key, n in counts.items():
            if (
                isinstance(key, str)
                and len(key) == 32
                and all(c in "0123456789abcdef" for c in key)
                and type(n) is int
                and n >= 0
            ):
                self.put(key, n)
                taken += 1
        return taken


_count_cache = CountCache()


def count_cache() -> CountCache:
    """The process-wide cache `DisplayCount` reads and fills."""
    return _count_cache


class DisplayCount:
    """`count_tokens` for showing a request without waiting for the encoding.

    A text's count is exact when the encoding is built or the text was counted
    before (`count_cache()`); otherwise it is `len // 4` (times the model's
    factor) and `estimated` goes up, so the caller can say the total is an
    estimate. `used` maps the digest of every exactly counted text to its o200k
    count: what the workspace stores so the next start counts them exactly.
    """

    def __init__(self, counter: TokenCounter, cache: CountCache | None = None) -> None:
        self.counter = counter
        self.cache = cache if cache is not None else _count_cache
        self.estimated = 0
        self.used: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        key = CountCache.key(text)
        base = self.cache.get(key)
        if base is None:
            encoding = encoding_ready()
            if encoding is None:
                self.estimated += 1
                return self.counter.scale(chars_estimate(text), exact_base=False)
            base = len(encoding.encode_ordinary(text))
            self.cache.put(key, base)
        self.used[key] = base
        return self.counter.scale(base, exact_base=True)


def o200k_count(text: str) -> int | None:
    """`text`'s o200k count when it is known without building the encoding (counted
    before, or the encoding built); None otherwise. Unlike a model's count it never
    moves with the model's learned factor: what a layer's figure is shown in."""
    if not text:
        return 0
    key = CountCache.key(text)
    base = _count_cache.get(key)
    if base is None:
        encoding = encoding_ready()
        if encoding is None:
            return None
        base = len(encoding.encode_ordinary(text))
        _count_cache.put(key, base)
    return base


def default_counter() -> TokenCounter:
    """A shared counter for `model=None` (exact o200k counts)."""
    return _default_counter
