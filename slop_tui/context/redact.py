"""Redaction of common secret shapes in text the engine writes down.

Summaries, memos and handoffs outlive the turn that produced them and are
sent again and again, so no API key, token or password may end up in them.
`redact_secrets` replaces:

- private key blocks (`-----BEGIN … PRIVATE KEY-----` … `-----END … PRIVATE KEY-----`);
- provider keys and tokens by shape: Anthropic `sk-ant-…`, OpenAI `sk-…` /
  `sk-proj-…`, Google `AIza…`, GitHub `ghp_…`/`gho_…`/`ghu_…`/`ghs_…`/`ghr_…`
  and `github_pat_…`, AWS access key ids `AKIA…`/`ASIA…`, Slack `xox?-…`, JWTs;
- the credential of an `Authorization: Bearer|Basic …` header and of a
  `scheme://user:password@host` URL;
- the value of a secret-looking assignment (`password=…`, `passwd: …`,
  `token=…`, `api_key=…`, `secret=…`, `DB_PASSWORD=…`,
  `aws_secret_access_key = …`, `"client_secret": "…"`), keeping the key.

Everything becomes `[REDACTED]`. Normal code survives: an assignment whose
value is an expression (`token = tokenizer.encode(x)`, `password=getpass()`),
a variable (`api_key=api_key`, `password=db_password`, `f(password=pw)`), a type
(`token: str`), `None`/booleans, an environment reference (`$TOKEN`) or a
placeholder (`<your key>`) is left alone, and so are hex digests such as git
SHAs, which no rule matches. The function is idempotent.
"""

from __future__ import annotations

import re

REDACTED = "[REDACTED]"

_PEM = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)",
    re.DOTALL,
)

# Standalone token shapes. Order matters: Anthropic before OpenAI (both start with sk-).
_TOKENS = [
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
]

_AUTH_HEADER = re.compile(
    r"(?i)(\bauthorization\b[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)([^\s\"',;]+)"
)
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/\-]{16,}=*)")
_URL_CREDENTIALS = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+:)([^@\s/]+)(@)")

# A key that ENDS with a secret word (so max_tokens, password_field or
# tokenizer are not keys), optionally quoted, then = or :, then the value.
_SECRET_WORD = (
    r"(?:password|passwd|passphrase|token|api[_\-]?key|apikey|secret|"
    r"secret[_\-]?key|access[_\-]?key|private[_\-]?key)"
)
_ASSIGNMENT = re.compile(
    r"(?i)(?P<key>[\"']?\b[A-Za-z0-9_\-]*?" + _SECRET_WORD + r"[\"']?)"
    r"(?P<sep>\s*(?::=|=|:)\s*)"
    r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\n]+)(?P=q)|(?P<bare>[^\s\"'`,;)\]}]+))"
)
_NOT_SECRET = frozenset(
    {"none", "null", "nil", "true", "false", "str", "string", "int", "bytes", "bool", "any",
     "optional", "undefined", "required", "redacted"}
)  # fmt: skip
_EXPRESSION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:[.(\[]|$)")


def _is_value(value: str, quoted: bool, key: str) -> bool:
    """True when an assignment's value looks like a literal secret."""
    v = value.strip()
    low = v.lower()
    if not v or v == REDACTED or low in _NOT_SECRET:
        return False
    if v[0] in "$<{[(%*" or v.startswith("os.") or "…" in v or set(v) <= {".", "x", "X", "*"}:
        return False
    if low == key.strip("\"'").lower():
        return False  # token=token, password=password: a variable of the same name
    if quoted:
        return True
    if len(v) < 3 or (len(v) <= 4 and v.isalpha() and v.islower()):
        return False  # f(password=pw), token=tok: a short variable name
    # An identifier followed by . ( [ is an expression, a snake_case name a variable.
    return not (_EXPRESSION.match(v) and (re.search(r"[.(\[]", v) or "_" in v))


def _assignment(match: re.Match[str]) -> str:
    quoted = match.group("quoted")
    value = quoted if quoted is not None else match.group("bare")
    if not _is_value(value, quoted is not None, match.group("key")):
        return match.group(0)
    q = match.group("q") or ""
    return f"{match.group('key')}{match.group('sep')}{q}{REDACTED}{q}"


def redact_secrets(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED]` (see the module doc)."""
    if not text:
        return text
    out = _PEM.sub(REDACTED, text)
    out = _URL_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED + m.group(3), out)
    out = _AUTH_HEADER.sub(
        lambda m: m.group(0) if m.group(2)[0] in "$<{[" else m.group(1) + REDACTED, out
    )
    for pattern in _TOKENS:
        out = pattern.sub(REDACTED, out)
    out = _BEARER.sub(lambda m: m.group(1) + REDACTED, out)
    return _ASSIGNMENT.sub(_assignment, out)


def contains_secret(text: str) -> bool:
    """True when `redact_secrets` would change `text`."""
    return redact_secrets(text) != text
