"""The one secret detector: credentials in text the engine writes down or sends on.

Summaries, anchors, memos, handoffs and exports outlive the turn that produced
them and are sent again and again, so no API key, token or password may end
up in them; the shell's environment is scrubbed with the same rules. Every
caller goes through `find_secrets` (or `redact_secrets`, which replaces each
span it finds with `[REDACTED]`):

- private key blocks (`-----BEGIN … PRIVATE KEY-----`, PGP `PRIVATE KEY BLOCK`),
  up to their end or the end of the text;
- provider keys and tokens by shape (`TOKEN_SHAPES`): OpenAI `sk-…`
  (`sk-proj-`, `sk-svcacct-`, `sk-admin-`, hyphens and underscores in the
  body), Anthropic `sk-ant-…`, Google `AIza…`, `GOCSPX-…`, `ya29.…`, `1//0…`,
  AWS `AKIA…`/`ASIA…`, GitHub `ghp_…`/`gho_…`/`ghu_…`/`ghs_…`/`ghr_…`/
  `github_pat_…`, GitLab `glpat-…` and friends, Slack `xox?-…`/`xapp-…`,
  Stripe `sk_live_…`/`rk_…`/`whsec_…`, JWTs, npm, PyPI, Hugging Face,
  SendGrid, DigitalOcean, Shopify, Telegram, CircleCI, Docker Hub, Vault,
  Terraform Cloud, Heroku, Linear and Postman tokens, age secret keys;
- webhook URLs whose path is the credential (Slack, Discord);
- the credential of an `Authorization: Bearer|Basic|Token …` header, of a
  bearer token anywhere, and of a `scheme://user:password@host` URL;
- the value of a secret-looking assignment (`password=…`, `DB_PASS=…`,
  `MYSQL_PWD=…`, `*_TOKEN=…`, `*_KEY=…`, `"client_secret": "…"`,
  `--password X`, a `.netrc` line, a Docker `"auth"`), keeping the key;
- passwords on a command line (`curl -u user:…`, `mysql -p…`, `sshpass -p …`,
  `aws configure set aws_secret_access_key …`) and an Azure SAS URL's `sig=`;
- prose passwords ("the admin password is hunter2", "use passphrase X",
  "password Tangerine!Basalt-88": without a verb the value must hold three kinds
  of character).

A value that ends a sentence loses its full stop first (`password=hunter2secret.`
is a literal, not `obj.attr`).

Normal code survives: an assignment whose value is an expression
(`token = tokenizer.encode(x)`), a variable (`api_key=api_key`,
`password=db_password`), a type (`token: str`), `None`/booleans, an
environment reference (`$TOKEN`, `${{ secrets.X }}`), a placeholder
(`<your key>`, `sk-...`, `xxxx`, `your-api-key-here`) or a path is left
alone, and so are hex digests, UUIDs, public keys and certificates, which no
rule matches. `*_KEY=` and `*_TOKEN=` values must look like credentials
(8+ characters of two kinds); a password needs only to be a literal.
The function is idempotent.

The shipped corpus `tests/data/secrets_corpus.toml` (credential shapes and
look-alikes) measures it; docs/reliability.md has the figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slop_tui.context.regex import lazy

REDACTED = "[REDACTED]"


@dataclass(frozen=True, slots=True)
class SecretSpan:
    start: int
    end: int
    kind: str


_PEM = lazy(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK|)-----"
    r".*?(?:-----END \1PRIVATE KEY\2-----|\Z)",
    re.DOTALL,
)

_URLSAFE = r"[A-Za-z0-9_\-]"
# Standalone shapes: the whole match is the secret. Each has the literal(s) a match must
# contain: a rule runs only on text holding one (a C-speed `in` test; the regexes cost
# about 4 ms per 200,000 characters each, and most texts hold none of these literals).
TOKEN_SHAPES: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (kind, lazy(pattern), triggers)
    for kind, pattern, triggers in (
        ("anthropic", rf"sk-ant-{_URLSAFE}{{20,}}", ("sk-ant-",)),
        ("openai", rf"sk-(?:proj-|svcacct-|admin-|None-)?{_URLSAFE}{{20,}}", ("sk-",)),
        ("stripe", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", ("_live_", "_test_")),
        ("stripe-webhook", r"whsec_[A-Za-z0-9]{24,}", ("whsec_",)),
        ("google-api", rf"AIza{_URLSAFE}{{35}}", ("AIza",)),
        ("google-oauth-secret", rf"GOCSPX-{_URLSAFE}{{20,}}", ("GOCSPX-",)),
        ("google-oauth-token", rf"ya29\.{_URLSAFE}{{20,}}", ("ya29.",)),
        ("google-refresh-token", rf"(?<![\w/])1//0{_URLSAFE}{{30,}}", ("1//0",)),
        ("aws-key-id", r"(?:AKIA|ASIA)[0-9A-Z]{16}\b", ("AKIA", "ASIA")),
        ("github", r"gh[pousr]_[A-Za-z0-9]{30,}", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
        ("github-pat", r"github_pat_[A-Za-z0-9_]{22,}", ("github_pat_",)),
        (
            "gitlab",
            rf"gl(?:pat|dt|rt|ptt|ft|imt|oas|cbt|ffct|agent)-{_URLSAFE}{{20,}}",
            tuple(
                f"gl{p}-"
                for p in ("pat", "dt", "rt", "ptt", "ft", "imt", "oas", "cbt", "ffct", "agent")
            ),
        ),
        ("gitlab-runner", rf"GR1348941{_URLSAFE}{{20,}}", ("GR1348941",)),
        ("slack", rf"xox[abposre]-{_URLSAFE}{{10,}}", ("xox",)),
        ("slack-refresh", rf"xoxe\.xox[bp]-{_URLSAFE}{{10,}}", ("xoxe.",)),
        ("slack-app", r"xapp-\d-[A-Za-z0-9\-]{10,}", ("xapp-",)),
        ("jwt", rf"eyJ{_URLSAFE}{{8,}}\.eyJ{_URLSAFE}{{8,}}\.{_URLSAFE}{{8,}}", (".eyJ",)),
        ("npm", r"npm_[A-Za-z0-9]{36}\b", ("npm_",)),
        ("pypi", rf"pypi-AgE{_URLSAFE}{{50,}}", ("pypi-AgE",)),
        ("huggingface", r"hf_[A-Za-z0-9]{30,}", ("hf_",)),
        ("sendgrid", rf"SG\.{_URLSAFE}{{16,}}\.{_URLSAFE}{{16,}}", ("SG.",)),
        ("digitalocean", r"do[por]_v1_[a-f0-9]{64}\b", ("_v1_",)),
        (
            "shopify",
            r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
            ("shpat_", "shpca_", "shppa_", "shpss_"),
        ),
        ("telegram", rf"(?<!\d)\d{{8,10}}:AA{_URLSAFE}{{33}}(?!{_URLSAFE})", (":AA",)),
        ("circleci", r"CCIPAT_[A-Za-z0-9]{20,}_[a-f0-9]{40}", ("CCIPAT_",)),
        ("docker-hub", rf"dckr_pat_{_URLSAFE}{{20,}}", ("dckr_pat_",)),
        ("vault", rf"hv[sbr]\.{_URLSAFE}{{24,}}", ("hvs.", "hvb.", "hvr.")),
        ("terraform-cloud", rf"[A-Za-z0-9]{{14}}\.atlasv1\.{_URLSAFE}{{60,}}", (".atlasv1.",)),
        ("heroku", rf"HRKU-{_URLSAFE}{{58,}}", ("HRKU-",)),
        ("linear", r"lin_api_[A-Za-z0-9]{40}", ("lin_api_",)),
        ("postman", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("PMAK-",)),
        ("age", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("AGE-SECRET-KEY-1",)),
    )
)
# URLs whose path carries the credential: group 1 is the secret part.
_WEBHOOKS = lazy(
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/\-]{20,})"
    r"|https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_\-]{20,})"
)
_AUTH_HEADER = lazy(
    r"authorization\b[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token|digest)\s+([^\s\"',;]+)"
)
_BEARER = lazy(r"bearer\s+([A-Za-z0-9._~+/\-]{16,}=*)")
_URL_CREDENTIALS = lazy(r"://[^/\s:@]*:([^@\s/]+)@")

# Key names, by what their value must look like to count as a secret. PASSWORD_WORDS:
# any literal. TOKEN_WORDS: any literal but a short number (`token: 1532` is a count).
# GENERIC_WORDS (`*_KEY=`, `auth`): a credential-looking value (8+ characters of two
# kinds), so `SORT_KEY=created_at` and `auth: true` survive.
_PASSWORD_WORDS = r"(?:password|passwd|passphrase|passcode|_pwd|_pass|secret|client[_\-]?secret)"
_TOKEN_WORDS = (
    r"(?:token|api[_\-]?key|apikey|secret[_\-\s]?(?:access[_\-\s]?)?key|access[_\-\s]?key|"
    r"private[_\-]?key|account[_\-]?key|credentials?)"
)
_GENERIC_WORDS = r"(?:auth|_key)"
# Found word first (a key must END with the word: `password_field` is no key); the key's
# start is then found backwards (`_KEY_START`). Key-first, the regex tried every position.
_ASSIGNMENT = lazy(
    r"(?=[pstacik_])(?:(?P<pw>"
    + _PASSWORD_WORDS
    + r")|(?P<tok>"
    + _TOKEN_WORDS
    + r")|(?P<gen>"
    + _GENERIC_WORDS
    + r"))(?![A-Za-z0-9])[\"']?"
    r"(?P<sep>\s*(?::=|=>|=|:)\s*)"
    r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\n]+)(?P=q)|(?P<bare>[^\s\"'`,;&)\]}]+))"
)
_KEY_START = lazy(r"[A-Za-z0-9_\-.]*$")
_FLAG = lazy(r"--(?i:password|passwd|token|api-key|secret|auth-token)[= ]\s*(\S+)")
# Command lines that carry a password or key as an argument (group 1).
_COMMAND_SECRET = lazy(
    r"\bcurl\b[^\n]*?\s(?:-u|--user)\s+[\"']?[^\s:\"']+:([^\s\"'@]+)"
    r"|\bmysql(?:dump|admin)?\b[^\n]*?\s-p([^\s\"']{3,})"
    r"|\bsshpass\s+-p\s*[\"']?([^\s\"']+)"
    r"|\baws\s+configure\s+set\s+(?:aws_secret_access_key|aws_session_token)\s+(\S+)"
)
# An Azure shared access signature: the `sig=` of a URL.
_SAS = lazy(r"[?&]sig=([A-Za-z0-9%+/=]{20,})")
_NETRC = lazy(r"machine\s+\S+\s+login\s+\S+\s+password\s+(\S+)")
_DOCKER_AUTH = lazy(r"\"auth\"\s*:\s*\"([A-Za-z0-9+/=]{16,})\"")
# Prose: "the admin password is hunter2", "password for the VPN is 'x y z'", "PIN is 4821",
# "use passphrase X". Group `v` (bare) or `qv` (quoted) is the secret.
_PROSE_VALUE = r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\n]{1,100})(?P=q)|(?P<v>[^\s\"'`]+))"
_PROSE = lazy(
    r"(?:pass(?:word|phrase|code)|pin(?: code)?)\b"
    r"(?:\s+(?:for|of|to|on)\s+[^.,;:\n]{1,40}?)?"
    r"\s+(?:(?:is|was|has been)\s+(?:now\s+)?(?:changed|set|reset|updated)\s+to|is now|"
    r"was|is|remains|became|set to|changed to|reset to)\s+" + _PROSE_VALUE
)
# "password Tangerine!Basalt-88", "passphrase: …" without a verb: the value must look
# like a credential of three kinds of character (upper, lower, digit, other).
_PROSE_BARE = lazy(
    r"(?:pass(?:word|phrase|code))\b\s*(?:[:,\-\u2013\u2014]\s*)?\s"
    r"(?P<v>[^\s\"'`]{8,100})"
)
_PROSE_USE = lazy(
    r"(?:with|use|using|try|enter)\s+(?:the\s+)?(?:password|passphrase|pin)\s+" + _PROSE_VALUE
)

_NOT_SECRET = frozenset(
    {"none", "null", "nil", "true", "false", "str", "string", "int", "bytes", "bool", "any",
     "optional", "undefined", "required", "redacted", "secret", "password", "pass", "passwd",
     "token", "changeme", "placeholder", "example", "bearer", "basic", "enabled", "disabled"}
)  # fmt: skip
# Words after "password is" that describe it rather than being it.
_PROSE_STOP = frozenset(
    """
    a an the not no never incorrect wrong invalid required missing empty expired correct valid
    too set stored hashed encrypted same different strong weak long short optional needed reset
    changed unknown blank null none ok fine visible hidden shown masked saved sent in on at for
    of to from your my our their his her its this that still now also only being used generated
    provided given rotated secure insecure sufficient case-sensitive managed kept protected
    mandatory enforced checked wrong. below above here there default
    """.split()
)
_SENTENCE_END = ".,;:!?"
_EXPRESSION = lazy(r"^[A-Za-z_][A-Za-z0-9_]*(?:[.(\[]|$)")
_PLACEHOLDER = lazy(
    r"(?i)^(?:your[_\-]|<|\$|%|\{|\*|\.\.\.|…)|your[_\-]?(?:api[_\-]?)?(?:key|token|secret)|"
    r"^(?:x+|X+|\*+|\.+|0+)$|-here$|_here$"
)
_DESCRIBED = lazy(r"(?i)^[a-z][a-z\-]*(?:ed|ing|ly|ble)$")


def _placeholder(value: str) -> bool:
    v = value.strip()
    return bool(_PLACEHOLDER.search(v)) or len(set(v.lower()) - set("-_.")) <= 2


def _credential_like(value: str) -> bool:
    """8+ characters of at least two kinds (lower, upper, digit, other), not a name."""
    if len(value) < 8 or re.fullmatch(r"[a-z]+(?:[_\-][a-z]+)*", value):
        return False
    if re.fullmatch(r"\d{1,8}", value):
        return False
    kinds = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[^A-Za-z0-9]"))
    return kinds >= 2


def _literal(value: str, quoted: bool, key: str) -> bool:
    """True when an assignment's value is a literal rather than code or a placeholder."""
    v = value.strip()
    low = v.lower()
    if not v or v == REDACTED or low in _NOT_SECRET or _placeholder(v):
        return False
    if v[0] in "$<{[(%*/~" or v.startswith(("os.", "./", "process.")) or "…" in v:
        return False
    if low == key.strip("\"'").lower():
        return False  # token=token, password=password: a variable of the same name
    if quoted:
        return True
    if len(v) < 3 or (len(v) <= 4 and v.isalpha() and v.islower()):
        return False  # f(password=pw), token=tok: a short variable name
    # An identifier followed by . ( [ is an expression, a snake_case name a variable.
    return not (_EXPRESSION.match(v) and (re.search(r"[.(\[]", v) or "_" in v))


def _assignment_value(m: re.Match[str]) -> tuple[int, int] | None:
    quoted = m.group("quoted")
    value = quoted if quoted is not None else m.group("bare")
    group = "quoted" if quoted is not None else "bare"
    if quoted is None:
        # A full stop (or comma, …) that ends the sentence is not part of the value:
        # `password=hunter2secret.` is no `obj.attr`.
        value = value.rstrip(_SENTENCE_END)
    before = m.string[max(0, m.start() - 80) : m.start()]
    key = _KEY_START.search(before).group(0) + m.string[m.start() : m.start("sep")]  # type: ignore[union-attr]
    if key.strip("\"'").upper() in ("PWD", "OLDPWD"):
        return None
    if not _literal(value, quoted is not None, key):
        return None
    if m.group("gen") is not None and not _credential_like(value.strip()):
        return None
    if m.group("tok") is not None and re.fullmatch(r"\d{1,7}", value.strip()):
        return None
    if m.group("tok") is not None and quoted is None and re.fullmatch(r"[a-z]+", value):
        return None  # "credentials: every variable …": a word of prose, no token
    start = m.start(group)
    return start, start + len(value)


def _prose_value(m: re.Match[str]) -> tuple[int, int] | None:
    if m.group("qv") is not None:
        value, group = m.group("qv"), "qv"
    else:
        value, group = m.group("v").rstrip(".,;:!?)"), "v"
        if value.lower() in _PROSE_STOP or _DESCRIBED.match(value) or value == REDACTED:
            return None
        after = m.string[m.start("v") + len(value) : m.start("v") + len(value) + 2]
        if re.fullmatch(r"[a-z]+", value) and re.fullmatch(r"\s[A-Za-z]", after):
            return None  # "changed to meet the policy": a word the sentence goes on from
    if not value or _placeholder(value) or value.lower() in _NOT_SECRET:
        return None
    start = m.start(group)
    return start, start + len(value)


def _bare_prose_value(m: re.Match[str]) -> tuple[int, int] | None:
    value = m.group("v").rstrip(_SENTENCE_END)
    kinds = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[^A-Za-z0-9]"))
    if kinds < 3 or not _credential_like(value) or _placeholder(value) or value == REDACTED:
        return None
    if value[0] in "$<{[(%*/~" or "://" in value or value.startswith(("./", "../")):
        return None
    if any(c in value for c in "[](){}<>=") or _EXPRESSION.match(value) and "." in value:
        return None  # `password: Optional[str] = None`, `password: self.Hash`: code
    start = m.start("v")
    return start, start + len(value)


def _group(m: re.Match[str]) -> tuple[int, int] | None:
    value = next(g for g in m.groups() if g is not None)
    if value[0] in "$<{[" or _placeholder(value) or value.lower() in _NOT_SECRET:
        return None
    index = next(i for i, g in enumerate(m.groups(), 1) if g is not None)
    return m.span(index)


def _whole(m: re.Match[str]) -> tuple[int, int] | None:
    text = m.group(0)
    body = text.split("-", 1)[-1] if text.startswith("sk-") else text
    if len(set(body.lower()) - set("-_.")) <= 3:
        return None  # sk-xxxxxxxx…: a placeholder
    return m.span()


_PROSE_TRIGGERS = ("password", "passphrase", "passcode", "pin ")
# (kind, pattern, the span of the secret in a match, trigger literals, whether the
# triggers are looked for in the lower-cased text)
_RULES = (
    ("private-key", _PEM, _whole, ("PRIVATE KEY",), False),
    *((kind, pattern, _whole, triggers, False) for kind, pattern, triggers in TOKEN_SHAPES),
    ("webhook", _WEBHOOKS, _group, ("hooks.slack.com", "/api/webhooks/"), False),
    ("authorization", _AUTH_HEADER, _group, ("authorization",), True),
    ("bearer", _BEARER, _group, ("bearer",), True),
    ("url-password", _URL_CREDENTIALS, _group, ("://",), False),
    ("flag", _FLAG, _group, ("--",), False),
    ("netrc", _NETRC, _group, ("machine",), True),
    ("command", _COMMAND_SECRET, _group, ("curl", "mysql", "sshpass", "aws"), False),
    ("sas", _SAS, _group, ("sig=",), False),
    ("docker-auth", _DOCKER_AUTH, _group, ('"auth"',), False),
    (
        "assignment",
        _ASSIGNMENT,
        _assignment_value,
        ("pass", "secret", "token", "key", "auth", "credential", "pwd"),
        True,
    ),
    ("prose", _PROSE, _prose_value, _PROSE_TRIGGERS, True),
    ("prose", _PROSE_USE, _prose_value, _PROSE_TRIGGERS, True),
    ("prose", _PROSE_BARE, _bare_prose_value, _PROSE_TRIGGERS, True),
)


# Rules whose pattern says itself where a match may start (a key ends with its word:
# `DB_PASSWORD=`; a bot token follows `bot` in a Telegram URL).
_OWN_BOUNDARY = frozenset({"assignment", "telegram", "google-refresh-token"})


_ESCAPES = ("\\n", "\\t", "\\r")


def _inside_word(text: str, at: int) -> bool:
    """A match that starts in the middle of a word (`task-…` for `sk-…`, `--x--password`).

    The patterns leave out a leading `\\b`: a pattern that starts with a literal is
    searched for at C speed, one that starts with an assertion is tried at every
    position (20 times slower)."""
    if at == 0 or text[at - 2 : at] in _ESCAPES:
        return False  # `\nsk-…` inside a JSON string: the escape ends the word before
    before, first = text[at - 1], text[at]
    if first == "-":
        return before.isalnum() or before in "_-"
    return (first.isalnum() or first == "_") and (before.isalnum() or before == "_")


class _Original:
    """A match on the lower-cased text, read from the original text (same offsets)."""

    __slots__ = ("_m", "string")

    def __init__(self, m: re.Match[str], text: str) -> None:
        self._m, self.string = m, text

    def group(self, g: int | str = 0) -> str | None:
        start, end = self._m.span(g)
        return None if start < 0 else self.string[start:end]

    def groups(self) -> tuple[str | None, ...]:
        return tuple(self.group(i) for i in range(1, len(self._m.groups()) + 1))

    def span(self, g: int | str = 0) -> tuple[int, int]:
        return self._m.span(g)

    def start(self, g: int | str = 0) -> int:
        return self._m.start(g)


# The folded rules' patterns are written in lower case and matched against the
# lower-cased text when it is ASCII (then the offsets are the same): a case-sensitive
# search is 3 to 7 times faster than IGNORECASE. Other text uses these copies.
_IGNORECASE = {
    id(pattern): lazy(pattern.pattern, re.IGNORECASE)
    for _, pattern, _, _, folded in _RULES
    if folded
}


def find_secrets(text: str) -> list[SecretSpan]:
    """Every credential in `text`, as non-overlapping spans in order (merged where rules
    overlap; the kind of the first rule that found it)."""
    if not text:
        return []
    found: list[SecretSpan] = []
    lower = text.lower()
    ascii_text = text.isascii()
    for kind, pattern, span_of, triggers, folded in _RULES:
        haystack = lower if folded else text
        if not any(t in haystack for t in triggers):
            continue
        if not folded:
            matches = pattern.finditer(text)
        elif ascii_text:
            matches = (_Original(m, text) for m in pattern.finditer(lower))
        else:
            matches = _IGNORECASE[id(pattern)].finditer(text)
        for m in matches:
            if kind not in _OWN_BOUNDARY and _inside_word(text, m.start()):
                continue
            span = span_of(m)  # type: ignore[arg-type]
            if span is not None and span[1] > span[0]:
                found.append(SecretSpan(span[0], span[1], kind))
    found.sort(key=lambda s: (s.start, -s.end))
    merged: list[SecretSpan] = []
    for s in found:
        if merged and s.start < merged[-1].end:
            last = merged[-1]
            if s.end > last.end:
                merged[-1] = SecretSpan(last.start, s.end, last.kind)
            continue
        merged.append(s)
    return merged


def redact_secrets(text: str) -> str:
    """`text` with every credential `find_secrets` finds replaced by `[REDACTED]`."""
    spans = find_secrets(text)
    if not spans:
        return text
    out: list[str] = []
    at = 0
    for s in spans:
        out.append(text[at : s.start])
        out.append(REDACTED)
        at = s.end
    out.append(text[at:])
    return "".join(out)


def contains_secret(text: str) -> bool:
    """True when `redact_secrets` would change `text`."""
    return bool(find_secrets(text))
