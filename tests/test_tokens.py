"""Token counting: the shipped o200k_base data, the fallback, and factor learning."""

from __future__ import annotations

import gzip
import hashlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import tiktoken

from slop_tui.context import tokens
from slop_tui.context.tokens import TokenCounter

# tiktoken names its cache file after the sha1 of the download URL.
TIKTOKEN_CACHE_KEY = "fb374d419588a4632f3f557e76b4b70aebbca790"
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

SAMPLES = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "def add(a: int, b: int) -> int:\n    return a + b\n",
    "Grüße aus München! 日本語のテキスト 🚀✨ naïve café",
    "\t\n  trailing   spaces \r\n\r\n",
    "x <|endoftext|> y <|endofprompt|>",
    "1234567890 3.14159 0xDEADBEEF",
]


@pytest.fixture(scope="module")
def encoding() -> tiktoken.Encoding:
    enc = tokens.get_encoding()
    assert enc is not None, tokens.encoding_error()
    return enc


@pytest.fixture(scope="module")
def reference_encoding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tiktoken.Encoding]:
    """o200k_base built by tiktoken itself, from a pre-seeded cache, so the network is never used."""
    from tiktoken import load, registry

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    raw = gzip.decompress(tokens._read_data())
    (cache / TIKTOKEN_CACHE_KEY).write_bytes(raw)
    assert hashlib.sha1(O200K_URL.encode()).hexdigest() == TIKTOKEN_CACHE_KEY

    def no_download(blobpath: str) -> bytes:
        raise AssertionError(f"tiktoken tried to download {blobpath}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(load, "read_file", no_download)
        # Don't leave tiktoken's registry holding an encoding built under this patch.
        mp.setattr(registry, "ENCODINGS", {})
        yield tiktoken.get_encoding("o200k_base")


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the loaded encoding for one test; monkeypatch restores it afterwards."""
    monkeypatch.setattr(tokens, "_state", tokens._EncodingState())


# --- the encoding -----------------------------------------------------------------------


def test_hello_world_ids(encoding: tiktoken.Encoding) -> None:
    assert encoding.encode_ordinary("hello world") == [24912, 2375]
    assert TokenCounter().count("hello world") == 2
    assert tokens.encoding_error() is None


def test_known_counts(encoding: tiktoken.Encoding) -> None:
    counter = TokenCounter("gpt-4o")
    assert counter.count("The quick brown fox jumps over the lazy dog.") == 10
    assert counter.count("def add(a: int, b: int) -> int:\n    return a + b\n") == 19
    assert counter.count("Grüße aus München! 日本語のテキスト 🚀✨ naïve café") == 18


def test_matches_tiktoken_own_loader(
    encoding: tiktoken.Encoding, reference_encoding: tiktoken.Encoding
) -> None:
    assert encoding.max_token_value == reference_encoding.max_token_value
    assert encoding._special_tokens == reference_encoding._special_tokens
    assert encoding._pat_str == reference_encoding._pat_str
    for text in SAMPLES:
        assert encoding.encode_ordinary(text) == reference_encoding.encode_ordinary(text), text


def test_special_token_text_is_ordinary_text(encoding: tiktoken.Encoding) -> None:
    text = "x <|endoftext|> y <|endofprompt|>"
    ids = encoding.encode_ordinary(text)
    assert 199999 not in ids and 200018 not in ids
    assert TokenCounter().count(text) == len(ids)
    assert TokenCounter("gemini-2.5-pro").count(text) == len(ids)


def test_empty_text_is_zero_tokens(encoding: tiktoken.Encoding) -> None:
    for counter in (TokenCounter(), TokenCounter("gemini-2.5-flash", factor=1.7)):
        assert counter.count("") == 0
        assert counter.estimate("") == 0
        assert counter.base_count("") == 0


def test_count_many(encoding: tiktoken.Encoding) -> None:
    assert TokenCounter().count_many(["hello world", "", "hello"]) == [2, 0, 1]


def test_default_counter_is_shared_and_exact(encoding: tiktoken.Encoding) -> None:
    assert tokens.default_counter() is tokens.default_counter()
    assert tokens.default_counter().model is None
    assert tokens.default_counter().is_exact


def test_import_pulls_in_no_ui_or_sdk() -> None:
    code = (
        "import sys, slop_tui.context.tokens as t; t.get_encoding();"
        "bad = [m for m in ('textual', 'openai', 'google.genai') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- model classification and estimates -------------------------------------------------


@pytest.mark.parametrize(
    ("model", "openai"),
    [
        (None, True),
        ("gpt-4o", True),
        ("GPT-4.1-mini", True),
        ("o1-preview", True),
        ("o3", True),
        ("o4-mini", True),
        ("chatgpt-4o-latest", True),
        ("text-embedding-3-small", True),
        ("openai/gpt-4o", True),
        ("gemini-2.5-pro", False),
        ("models/gemini-2.0-flash", False),
        ("claude-sonnet-4", False),
        ("llama3.1:8b", False),
    ],
)
def test_is_openai_model(model: str | None, openai: bool) -> None:
    assert tokens.is_openai_model(model) is openai


def test_estimate_is_chars_over_four() -> None:
    counter = TokenCounter("gemini-2.5-pro", factor=2.0)
    assert counter.estimate("abc") == 1
    assert counter.estimate("a" * 4000) == 1000
    assert tokens.chars_estimate("a") == 1


def test_non_openai_model_applies_factor(encoding: tiktoken.Encoding) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 20
    exact = len(encoding.encode_ordinary(text))
    gemini = TokenCounter("gemini-2.5-pro", factor=1.25)
    assert not gemini.is_exact
    assert gemini.base_count(text) == exact
    assert gemini.count(text) == round(exact * 1.25)
    # The factor must never apply to exact counts.
    gpt = TokenCounter("gpt-4o", factor=1.25)
    assert gpt.is_exact
    assert gpt.count(text) == exact


# --- learning the factor ----------------------------------------------------------------


def test_learn_moves_toward_ratio() -> None:
    counter = TokenCounter("gemini-2.5-pro")
    assert counter.learn(1000, 1200) == pytest.approx(1.0 + 0.3 * (1.2 - 1.0))
    assert counter.factor == pytest.approx(1.06)
    for _ in range(40):
        counter.learn(1000, 1200)
    assert counter.factor == pytest.approx(1.2)
    for _ in range(40):
        counter.learn(1000, 900)
    assert counter.factor == pytest.approx(0.9)


def test_learn_clamps() -> None:
    counter = TokenCounter("gemini-2.5-pro")
    for _ in range(50):
        counter.learn(100, 100_000)
    assert counter.factor == pytest.approx(2.0)
    for _ in range(50):
        counter.learn(10_000, 60)
    assert counter.factor == pytest.approx(0.5)


def test_one_wild_report_does_not_jump_to_a_bound() -> None:
    counter = TokenCounter("gemini-2.5-pro")
    counter.learn(100, 100_000)
    assert counter.factor == pytest.approx(0.7 * 1.0 + 0.3 * 2.0)


def test_learn_ignores_small_or_degenerate_reports() -> None:
    counter = TokenCounter("gemini-2.5-pro", factor=1.1)
    assert counter.learn(10, 49) == pytest.approx(1.1)
    assert counter.learn(0, 500) == pytest.approx(1.1)
    assert counter.learn(-5, 500) == pytest.approx(1.1)
    assert counter.factor == pytest.approx(1.1)
    assert counter.learn(100, 50) != pytest.approx(1.1)


def test_constructor_clamps_stored_factor() -> None:
    assert TokenCounter("x", factor=9.0).factor == 2.0
    assert TokenCounter("x", factor=0.01).factor == 0.5
    assert TokenCounter("x", factor=float("nan")).factor == 1.0


# --- fallback when the encoding cannot be built -----------------------------------------


def test_missing_data_file_falls_back(monkeypatch: pytest.MonkeyPatch, fresh_state: None) -> None:
    monkeypatch.setattr(tokens, "_DATA_FILE", "no-such-file.tiktoken.gz")
    counter = TokenCounter("gpt-4o")
    assert counter.count("a" * 41) == 10
    assert counter.count("hi") == 1
    assert counter.count("") == 0
    assert not counter.is_exact
    reason = tokens.encoding_error()
    assert reason is not None and "no-such-file" in reason
    assert tokens.get_encoding() is None


def test_fallback_still_applies_factor(monkeypatch: pytest.MonkeyPatch, fresh_state: None) -> None:
    def unreadable() -> bytes:
        raise OSError("unreadable")

    monkeypatch.setattr(tokens, "_read_data", unreadable)
    assert TokenCounter("gemini-2.5-pro", factor=1.5).count("a" * 400) == 150
    # Without the encoding an OpenAI count is only an estimate, so the factor applies too.
    assert TokenCounter("gpt-4o", factor=1.5).count("a" * 400) == 150
    assert tokens.encoding_error() == "OSError: unreadable"


def test_hash_mismatch_falls_back(monkeypatch: pytest.MonkeyPatch, fresh_state: None) -> None:
    monkeypatch.setattr(tokens, "_read_data", lambda: gzip.compress(b"aGVsbG8= 0\n"))
    assert TokenCounter().count("a" * 8) == 2
    reason = tokens.encoding_error()
    assert reason is not None and "sha256" in reason


def test_missing_tiktoken_falls_back(monkeypatch: pytest.MonkeyPatch, fresh_state: None) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    assert TokenCounter().count("abcdefgh") == 2
    reason = tokens.encoding_error()
    assert reason is not None and reason.startswith(("ImportError", "ModuleNotFoundError"))


def test_encoding_loaded_does_not_load(monkeypatch: pytest.MonkeyPatch, fresh_state: None) -> None:
    monkeypatch.setattr(tokens, "_read_data", lambda: b"")
    assert not tokens.encoding_loaded()
    tokens.get_encoding()
    assert tokens.encoding_loaded()


# --- concurrency ------------------------------------------------------------------------


def test_first_load_is_once_under_concurrency(
    encoding: tiktoken.Encoding, monkeypatch: pytest.MonkeyPatch, fresh_state: None
) -> None:
    builds: list[int] = []

    def slow_build(_: bytes) -> tiktoken.Encoding:
        builds.append(1)
        time.sleep(0.05)  # widen the race window
        return encoding

    monkeypatch.setattr(tokens, "_build_encoding", slow_build)
    start = threading.Barrier(4)
    results: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        start.wait()
        n = TokenCounter().count("hello world")
        with lock:
            results.append(n)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results == [2, 2, 2, 2]
    assert builds == [1]


# --- memory and the rank cache ----------------------------------------------------------


def test_the_python_rank_dict_is_released_and_encode_decode_still_work(
    encoding: tiktoken.Encoding, reference_encoding: tiktoken.Encoding
) -> None:
    # tiktoken keeps the {bytes: rank} dict (~27 MB) only for pickling; the core has its own.
    assert encoding._mergeable_ranks == {}
    for text in SAMPLES:
        ids = encoding.encode_ordinary(text)
        assert ids == reference_encoding.encode_ordinary(text)
        assert encoding.decode(ids) == text
    assert encoding.decode_single_token_bytes(24912) == b"hello"


@pytest.fixture
def rank_cache(tmp_path, monkeypatch: pytest.MonkeyPatch, fresh_state: None):
    """A rank cache in tmp_path for one test (the process default is none)."""
    monkeypatch.setattr(tokens, "_rank_cache", tokens._RankCache())
    return tokens.use_rank_cache(tmp_path / "cache")


def test_rank_cache_is_written_once_and_read_instead_of_the_rank_file(
    rank_cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not rank_cache.exists()
    first = TokenCounter().count("The quick brown fox jumps over the lazy dog.")
    assert first == 10 and rank_cache.exists()
    assert rank_cache.name.startswith("o200k_base-" + tokens.O200K_SHA256[:16])

    # A new process: the rank file is not read at all, the counts are the same.
    monkeypatch.setattr(tokens, "_state", tokens._EncodingState())

    def no_rank_file() -> bytes:
        raise AssertionError("the rank file was read although the cache is valid")

    monkeypatch.setattr(tokens, "_read_data", no_rank_file)
    assert TokenCounter().count("The quick brown fox jumps over the lazy dog.") == 10
    assert TokenCounter().count("Grüße aus München! 日本語のテキスト 🚀✨ naïve café") == 18
    assert tokens.encoding_error() is None


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "other-ranks"])
def test_a_damaged_or_foreign_rank_cache_is_ignored(
    rank_cache, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    TokenCounter().count("x")  # writes the cache
    blob = rank_cache.read_bytes()
    if damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "flip":
        blob = blob[:-10] + bytes([blob[-10] ^ 1]) + blob[-9:]
    elif damage == "garbage":
        blob = b"not a cache"
    else:  # a valid blob made from other ranks
        blob = tokens.pack_ranks({b"a": 0, b"b": 1})
    assert tokens.unpack_ranks(blob) is None
    rank_cache.write_bytes(blob)
    monkeypatch.setattr(tokens, "_state", tokens._EncodingState())
    # Parsed from the rank file again (10 exact tokens; a failed build would say 11).
    assert TokenCounter().count("The quick brown fox jumps over the lazy dog.") == 10
    assert tokens.encoding_error() is None
    assert tokens.unpack_ranks(rank_cache.read_bytes()) is not None  # and rewritten


def test_ranks_that_are_not_0_to_n_are_not_cached() -> None:
    assert tokens.pack_ranks({b"a": 0, b"b": 2}) is None
    assert tokens.unpack_ranks(tokens.pack_ranks({b"a": 0, b"b": 1})) is None  # too few


def test_an_unwritable_rank_cache_only_costs_the_speed_up(
    tmp_path, monkeypatch: pytest.MonkeyPatch, fresh_state: None
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setattr(tokens, "_rank_cache", tokens._RankCache())
    tokens.use_rank_cache(blocker / "cache")
    # 10 exact tokens; an encoding that failed to build would estimate 11 (chars / 4).
    assert TokenCounter().count("The quick brown fox jumps over the lazy dog.") == 10
    assert tokens.encoding_error() is None
    assert list(tmp_path.iterdir()) == [blocker]


# --- counting for display without the encoding ------------------------------------------


@pytest.fixture
def fresh_counts(monkeypatch: pytest.MonkeyPatch) -> tokens.CountCache:
    cache = tokens.CountCache()
    monkeypatch.setattr(tokens, "_count_cache", cache)
    return cache


def test_display_count_never_builds_the_encoding_and_says_what_it_estimated(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None, fresh_counts: tokens.CountCache
) -> None:
    def no_build() -> tiktoken.Encoding:
        raise AssertionError("DisplayCount built the encoding")

    monkeypatch.setattr(tokens, "_load_encoding", no_build)
    count = tokens.DisplayCount(TokenCounter("gpt-4o"))
    assert count("a" * 40) == 10  # len // 4
    assert count("") == 0
    assert count.estimated == 1 and count.used == {}
    assert tokens.encoding_ready() is None and not tokens.encoding_loaded()

    # A count stored earlier (e.g. loaded from the ledger) is exact without the encoding.
    key = tokens.CountCache.key("The quick brown fox jumps over the lazy dog.")
    fresh_counts.put(key, 10)
    count = tokens.DisplayCount(TokenCounter("gpt-4o"))
    assert count("The quick brown fox jumps over the lazy dog.") == 10
    assert count.estimated == 0 and count.used == {key: 10}
    # Another model applies its factor to the exact o200k count, as TokenCounter.count does.
    gemini = tokens.DisplayCount(TokenCounter("gemini-2.5-pro", factor=1.5))
    assert gemini("The quick brown fox jumps over the lazy dog.") == 15
    assert gemini("a" * 40) == 15 and gemini.estimated == 1


def test_display_count_is_exact_once_the_encoding_is_built(
    encoding: tiktoken.Encoding, fresh_counts: tokens.CountCache
) -> None:
    count = tokens.DisplayCount(TokenCounter("gpt-4o"))
    for text in SAMPLES:
        assert count(text) == TokenCounter("gpt-4o").count(text)
    assert count.estimated == 0
    assert len(count.used) == len(SAMPLES) == len(fresh_counts)
    assert fresh_counts.get(tokens.CountCache.key("hello world")) == 2


def test_count_cache_takes_only_well_formed_entries_and_stays_bounded() -> None:
    cache = tokens.CountCache(limit=3)
    good = tokens.CountCache.key("a")
    assert cache.update({good: 5, "short": 1, "g" * 32: 1, tokens.CountCache.key("b"): -1}) == 1
    assert cache.update({tokens.CountCache.key("c"): True, tokens.CountCache.key("d"): "7"}) == 0
    assert cache.get(good) == 5 and len(cache) == 1
    for text in ("w", "x", "y", "z"):
        cache.put(tokens.CountCache.key(text), 1)
    assert len(cache) == 3 and cache.get(good) is None  # the oldest went first


# --- releasing the encoding -------------------------------------------------------------


def test_a_released_encoding_is_built_again_and_its_counts_stay_exact(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None, fresh_counts: tokens.CountCache
) -> None:
    counter = TokenCounter("gpt-4o")
    counted = {text: counter.count(text) for text in SAMPLES}
    assert counted["hello world"] == 2 and counter.is_exact
    assert tokens.release_encoding()
    assert tokens.encoding_ready() is None and not tokens.encoding_loaded()
    assert not tokens.release_encoding()  # nothing left to drop
    tokens.trim_heap()

    # What was counted is in the count cache: shown exactly, and counted again without
    # building the encoding; the counter stays exact (it could build it again).
    builds = []
    load = tokens._load_encoding
    monkeypatch.setattr(tokens, "_load_encoding", lambda: builds.append(1) or None)
    display = tokens.DisplayCount(TokenCounter("gpt-4o"))
    assert [display(text) for text in SAMPLES] == list(counted.values())
    assert display.estimated == 0 and tokens.o200k_count("hello world") == 2
    assert [counter.count(text) for text in SAMPLES] == list(counted.values())
    assert counter.is_exact and builds == []

    # A text never counted builds it again, with the same result as before the release.
    monkeypatch.setattr(tokens, "_load_encoding", load)
    assert tokens.encoding_ready() is None
    assert counter.count("hello world, again") == len(
        tokens.get_encoding().encode_ordinary("hello world, again")
    )
    assert tokens.encoding_ready() is not None


def test_a_failed_build_is_not_released(
    monkeypatch: pytest.MonkeyPatch, fresh_state: None, fresh_counts: tokens.CountCache
) -> None:
    monkeypatch.setattr(tokens, "_read_data", lambda: b"")
    assert tokens.get_encoding() is None
    assert not tokens.release_encoding()
    assert tokens.encoding_loaded() and tokens.encoding_error() is not None
    assert not TokenCounter("gpt-4o").is_exact
    assert TokenCounter("gpt-4o").count("a" * 40) == 10 and len(fresh_counts) == 0
