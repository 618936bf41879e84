"""Secret redaction: common shapes go, normal code and hashes stay."""

from __future__ import annotations

import pytest

from slop_tui.context.redact import REDACTED, contains_secret, redact_secrets

# Synthetic secrets of the real shapes (none of them is a live credential).
OPENAI = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
OPENAI_PROJ = "sk-proj-" + "Ab12_Cd34-Ef56Gh78Ij90Kl12Mn34"
ANTHROPIC = "sk-ant-api03-" + "abcDEF123456_ghiJKL789-mnoPQR"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"  # 39 characters
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_OAUTH = "gho_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuv"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SLACK = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOp"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key {OPENAI} here", f"key {REDACTED} here"),
        (f"export OPENAI_API_KEY={OPENAI_PROJ}", f"export OPENAI_API_KEY={REDACTED}"),
        (f"anthropic: {ANTHROPIC}", f"anthropic: {REDACTED}"),
        (f"url?key={GOOGLE}&q=1", f"url?key={REDACTED}&q=1"),
        (f"{GITHUB} {GITHUB_OAUTH} {GITHUB_PAT}", f"{REDACTED} {REDACTED} {REDACTED}"),
        (f"id {AWS_ID}", f"id {REDACTED}"),
        (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {REDACTED}"),
        (f"SLACK={SLACK}", f"SLACK={REDACTED}"),
        (f"cookie {JWT}", f"cookie {REDACTED}"),
        (f'-H "Authorization: Bearer {OPENAI}x"', f'-H "Authorization: Bearer {REDACTED}"'),
        ('"Authorization": "Bearer abc.def-ghi_jkl"', f'"Authorization": "Bearer {REDACTED}"'),
        ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {REDACTED}"),
        ("token type bearer a1b2c3d4e5f6g7h8i9j0", f"token type bearer {REDACTED}"),
        (f"before\n{PEM}\nafter", f"before\n{REDACTED}\nafter"),
        ("-----BEGIN PRIVATE KEY-----\nMIIE...cut", REDACTED),
        ("password=hunter2", f"password={REDACTED}"),
        ("passwd: letmein99", f"passwd: {REDACTED}"),
        ("token=abc123", f"token={REDACTED}"),
        ('api_key="xyz"', f'api_key="{REDACTED}"'),
        ("secret: s3cr3t", f"secret: {REDACTED}"),
        ("DB_PASSWORD=correcthorse", f"DB_PASSWORD={REDACTED}"),
        ("x-api-key: 0123456789abcdef", f"x-api-key: {REDACTED}"),
        ('{"client_secret": "abcd", "password": "p@ss"}',
         f'{{"client_secret": "{REDACTED}", "password": "{REDACTED}"}}'),
        ("password=supersecret1", f"password={REDACTED}"),
        ("postgres://admin:hunter2@db:5432/app", f"postgres://admin:{REDACTED}@db:5432/app"),
    ],
)  # fmt: skip
def test_secrets_are_redacted(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected
    assert contains_secret(text)
    assert redact_secrets(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=500 and count_tokens(text) and tokens_total: 12",
        "password_field = forms.CharField()",
        "token = tokenizer.encode(text)",
        "def get_token(self) -> str:",
        "client = OpenAI(api_key=api_key)",
        "password = getpass()",
        'secret = os.environ["SECRET"]',
        'token: str = ""',
        "password: Optional[str] = None",
        "api_key: str | None = None",
        "f(password=pw)",
        "conn(password=db_password)",
        "token=token",
        'curl -H "Authorization: Bearer $TOKEN"',
        "api_key=<your key here>",
        "commit 3f2a9b1c0d4e5f60718293a4b5c6d7e8f9012345",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "pip install scikit-learn; sk-learn is its old name",
        "task-1234 and desk-lamp",
        "The secret: we cache.",
        "PWD=/home/user/project",
        "https://example.com/path?page=2",
        "",
    ],
)
def test_normal_text_and_code_survive(text: str) -> None:
    assert redact_secrets(text) == text
    assert not contains_secret(text)
