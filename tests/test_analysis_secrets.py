"""The shared secret detector: spellings, decodings, placeholders, redaction, scan cap."""

from __future__ import annotations

import base64
import codecs
import re
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis import _secrets
from vsh_ai.analysis._secrets import (
    UNSCANNED,
    SecretFinding,
    contains_secret,
    find_secret,
    find_secrets,
    is_placeholder,
    redact_text,
    secret_lines,
)

# Test-only credentials, assembled so this file itself carries no literal token.
AWS_ID = "AKIA" + "Z7QO4HRCN2XWSV5P"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYZ3x9Qk2LmT4v"
GITHUB = "ghp_" + "R8xq2LmN4vT7yB1cK9dF3hJ6pW0sZ5aE8uGi"
STRIPE = "sk_live_" + "51HqX2eLkT9vB3nM7pQ4rS8w"
PYPI = "pypi-AgEIcHlwaS5vcmc" + "CJGI3ZTcxNTI5LTYyZTMtNDAzOC1hZmE5LWY1NTE4ZjE2MmQ3NQACKlszLCI4"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXy1"
HF = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm1234567"
GITLAB = "glpat-" + "x7Yz9AbC3dEf5GhI1jKl"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T0A1B2C3D/B4E5F6G7H/q8R9s0T1u2V3w4X5y6Z7a8B9"
SLACK_BOT = "xoxb-" + "2401-8812-a7Bc9dE1fG3hI5jK"
SLACK_APP = "xapp-1-" + "A02B3C4D5E6-7788990011-a1b2c3d4e5f6a7b8"
WHSEC = "whsec_" + "Q3r5T7y9U1i3O5p7A9s1D3f5G7h9"
OPENAI = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8x"
ANTHROPIC = "sk-ant-api03-" + "Zy8xWv6uTs4rQp2oNm0lKj9i"
GOOGLE = "AIza" + "SyD3x9Qk2LmT4vB7nR1wE5yU8iO0pA6sD2f"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

# Keys generated for these tests with openssl / ssh-keygen; never used anywhere.
RSA_BODY = """\
MIICXAIBAAKBgQDN3BQ8Yt5Fz9B+1wq3OS0GQK4w0rJ3GmXh3R3Rk0w4m3ZJ6m8Y
n0C8kJmW0u9p+6fH7l5g2YbH1Gq4K6kq9nBq5m0g0rI9H8wq7v0XyZ6w9m8k3u2R
t7o9Q2q5w3Q0g1N5y3C6H8dQ4s8b2w1o5Y9h3j2k7l6m5n4o3p2q1r0sAgMBAAEC
gYBZ0n0o1p2q3r4s5t6u7v8w9x0y1z2A3B4C5D6E7F8G9H0I1J2K3L4M5N6O7P8Q
"""
EC_PKCS8_BODY = """\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgCALLOH20n6dHr1vp
pXIFVSH9s1B1irP2sufV3iNJaCOhRANCAARRBtFKtBVvAfcuZoYyd2KIP1R+bKXg
kX9jfFDAMHxX0Hq6bTEc1Wrr/F99QC8nrbtMeg7/KhFYGfhx8/njOWgB
"""
OPENSSH_BODY = """\
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACC63MvihUD/8AQoNxVl73sv62sFnZsJwuOdvFM2ITiMHQAAAJALjSiwC40o
"""
CERT_BODY = """\
MIIBbTCCAROgAwIBAgIUPvCUCL6eb9FcyYx8yGmAcbi/d+cwCgYIKoZIzj0EAwIw
DDEKMAgGA1UEAwwBeDAeFw0yNjExMzAxMzAyMDlaFw0yNjEyMDExMzAyMDlaMAwx
"""


def _hex(text: str) -> str:
    return text.encode().hex()


# (text, the secret inside it that must be found and hidden)
SPELLINGS: list[tuple[str, str]] = [
    # kinds the old rule knew
    ("-----BEGIN RSA PRIVATE KEY-----\n" + RSA_BODY + "-----END RSA PRIVATE KEY-----\n", RSA_BODY),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + OPENSSH_BODY, OPENSSH_BODY.split("\n")[0]),
    (f"aws_access_key_id = {AWS_ID}", AWS_ID),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    (f'token: "{GITHUB}"', GITHUB),
    ("github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "11ABCDEFG0123456789"),
    (f"SLACK={SLACK_BOT}", SLACK_BOT),
    (f"client = OpenAI(api_key='{OPENAI}')", OPENAI),
    (f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    (f"maps?key={GOOGLE}", GOOGLE),
    (f"stripe.api_key = {STRIPE}", STRIPE),
    ("rk_live_" + "51HqX2eLkT9vB3nM7pQ4rS8w", "51HqX2eLkT9vB3nM7pQ4rS8w"),
    (f"Cookie: session={JWT}", JWT),
    ("postgres://admin:Sup3rS3cret@db.internal:5432/app", "Sup3rS3cret"),
    ('password = "hunter2hunter2"', "hunter2hunter2"),
    ("export DB_PASSWORD=s3cr3tpassw0rd", "s3cr3tpassw0rd"),
    # the gaps of issue 9
    (f'key = "{AWS_ID[:4]}" + "{AWS_ID[4:]}"', AWS_ID[4:]),
    (f"key = '{AWS_ID[:8]}' '{AWS_ID[8:]}'", AWS_ID[8:]),
    (f'key = f"{AWS_ID[:6]}" f"{AWS_ID[6:]}"', AWS_ID[6:]),
    (f'key = "".join(["{AWS_ID[:5]}", "{AWS_ID[5:12]}", "{AWS_ID[12:]}"])', AWS_ID[12:]),
    (f'KEY="{AWS_ID[:10]}""{AWS_ID[10:]}"', AWS_ID[10:]),
    (f'key = ("{AWS_ID[:10]}"\n       "{AWS_ID[10:]}")', AWS_ID[10:]),
    (f"stripe_hex = '{_hex(STRIPE)}'", _hex(STRIPE)),
    (f"blob = '{codecs.encode(GITHUB, 'rot13')}'", codecs.encode(GITHUB, "rot13")),
    (RSA_BODY, RSA_BODY.split("\n")[1]),
    (EC_PKCS8_BODY, EC_PKCS8_BODY.split("\n")[0]),
    ("key_material = '''\n" + OPENSSH_BODY + "'''", OPENSSH_BODY.split("\n")[0]),
    (f"password = {PYPI}", PYPI),
    (f"//registry.npmjs.org/:_authToken={NPM}", NPM),
    (f"HF_TOKEN={HF}", HF),
    (f"gitlab: {GITLAB}", GITLAB),
    (f"webhook = '{SLACK_HOOK}'", SLACK_HOOK[33:]),
    (f"SLACK_APP_TOKEN={SLACK_APP}", SLACK_APP),
    (f"STRIPE_WEBHOOK_SECRET={WHSEC}", WHSEC),
    (
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={AZURE_KEY};"
        "EndpointSuffix=core.windows.net",
        AZURE_KEY,
    ),
    (
        "https://acme.blob.core.windows.net/c/x?sv=2022-11-02&ss=b&sig=r4Nd0mS1gN4tur3%2Bx9QkZ%3D",
        "r4Nd0mS1gN4tur3",
    ),
    (
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 1\n"
        "AAAAC3NzaC1lZDI1NTE5AAAAIDtPq5q\nPrivate-Lines: 1\n"
        "AAAAIOz1Zx4xYp8b0rG5dBWg9mZ8fLgR8H1zQvPp7cDk2XbA\nPrivate-MAC: 8f3a\n",
        "AAAAIOz1Zx4xYp8b0rG5dBWg9mZ8fLgR8H1zQvPp7cDk2XbA",
    ),
    (
        'curl -H "Authorization: Bearer 9fK2mX7qL4vN8pR3tW6yZ1" https://api',
        "9fK2mX7qL4vN8pR3tW6yZ1",
    ),
    ("Authorization: Basic YWRtaW46czNjcjN0UGFzcw==", "YWRtaW46czNjcjN0UGFzcw=="),
    ("headers = {'Authorization': 'Bearer " + JWT + "'}", JWT),
    ("curl -u deploy:Tr0ub4dor3x https://example.org", "Tr0ub4dor3x"),
    ("mysql --password Tr0ub4dor3x -h db", "Tr0ub4dor3x"),
    ("app --db-password=Tr0ub4dor3x", "Tr0ub4dor3x"),
    ("DB_PASS=Tr0ub4dor3x", "Tr0ub4dor3x"),
    ("SESSION_SIGNING=c2f9a0b8e7d6c5b4", "c2f9a0b8e7d6c5b4"),
    ("SESSION_SIGNING_KEY: 'c2f9a0b8e7d6c5b4'", "c2f9a0b8e7d6c5b4"),
    ("GET /v1/items?format=json&api_key=Q7w8E9r0T1y2U3i4", "Q7w8E9r0T1y2U3i4"),
    ("CACHE=redis://:R3disP4ss9@cache:6379/0", "R3disP4ss9"),
    ("HTTPS://bob:W1nter2026@git.example.com/repo.git", "W1nter2026"),
    ("https://bob:p@ss/w0rd9@example.com/x", "p@ss/w0rd9"),
    ("<password>Tr0ub4dor3x</password>", "Tr0ub4dor3x"),
    ('<add key="DbPassword" value="Tr0ub4dor3x"/>', "Tr0ub4dor3x"),
    ("$db = ['password' => 'Tr0ub4dor3x'];", "Tr0ub4dor3x"),
    ("database:\n  password:\n    Tr0ub4dor3x\n  host: db\n", "Tr0ub4dor3x"),
    ("database:\n  password: >-\n    Tr0ub4dor3x-folded\n    -continued\n", "Tr0ub4dor3x"),
    ("api:\n  secret: |\n    Tr0ub4dor3x-literal\n", "Tr0ub4dor3x"),
    ("machine api.github.com login bob password Tr0ub4dor3x\n", "Tr0ub4dor3x"),
    ("machine api.github.com\n  login bob\n  password Tr0ub4dor3x\n", "Tr0ub4dor3x"),
    (
        '{"auths": {"registry.example.com": {"auth": "'
        + base64.b64encode(b"bob:Tr0ub4dor3x").decode()
        + '"}}}',
        base64.b64encode(b"bob:Tr0ub4dor3x").decode(),
    ),
    (
        "User name,Password,Access key ID,Secret access key,Console login link\n"
        f"alice,Xy7!pass,{AWS_ID},{AWS_SECRET},https://acme.signin.aws.amazon.com/console\n",
        AWS_SECRET,
    ),
    (f"Access key ID,Secret access key\n{AWS_ID},{AWS_SECRET}\n", AWS_SECRET),
    (
        "data = (\n"
        + "\n".join(
            f'    "{line}"'
            for line in textwrap.wrap(base64.b64encode(GITHUB.encode()).decode(), 16)
        )
        + "\n)",
        base64.b64encode(GITHUB.encode()).decode()[:16],
    ),
    (
        textwrap.fill(base64.b64encode(f"token={GITHUB}\n".encode()).decode(), 20),
        base64.b64encode(f"token={GITHUB}\n".encode()).decode()[:20],
    ),
    (f"keys/{AWS_ID}.txt", AWS_ID),
    (f"backup-{GITHUB}.json", GITHUB),
    # our own spellings
    ("passwd: 'Tr0ub4dor3x'", "Tr0ub4dor3x"),
    ('dbPassword := "Tr0ub4dor3x"', "Tr0ub4dor3x"),
    ('if password == "Tr0ub4dor3x":', "Tr0ub4dor3x"),
    ("client_secret=9a8b7c6d5e4f3a2b1c0d", "9a8b7c6d5e4f3a2b1c0d"),
    ("PRIVATE_KEY_PASSPHRASE='correct horse'", "correct horse"),
    ("x = '\\x" + "\\x".join(f"{b:02x}" for b in GITHUB.encode()) + "'", "\\x67"),
    ("u = " + quote(f"token={GITHUB}", safe=""), "%3D"),
    ("contraseña = 'Tr0ub4dor3x'", "Tr0ub4dor3x"),
    (
        "export const cfg = { apiKey: 'AbCdEf0123456789GhIj', region: 'eu' }",
        "AbCdEf0123456789GhIj",
    ),
    ("ENV AWS_SECRET_ACCESS_KEY " + AWS_SECRET, AWS_SECRET),
    ("docker login -p Tr0ub4dor3x registry", "Tr0ub4dor3x"),
    (f'{{"private_key": "{RSA_BODY.strip().replace(chr(10), "")}"}}', RSA_BODY[:20]),
]


@pytest.mark.parametrize(("text", "secret"), SPELLINGS)
def test_every_spelling_is_found_and_hidden(text: str, secret: str) -> None:
    found = find_secrets(text)
    assert found, f"missed: {text!r}"
    assert all(isinstance(f, SecretFinding) and 0 <= f.start < f.end <= len(text) for f in found)
    redacted, findings = redact_text(text)
    assert findings == found
    assert secret not in redacted, redacted
    assert find_secrets(redacted) == ()
    assert redacted.count("\n") == text.count("\n"), "redaction keeps line numbers"


NOT_SECRETS = [
    "max_keys = 10",
    "keyboard = 1",
    "keyboard_layout = 'us'",
    "password_min_length = 12",
    "token_ttl = 3600",
    "PASSWORD_RESET_TIMEOUT = 3600",
    "secret_name = 'prod/db/credentials'",
    "password = get_password()",
    "password = os.environ['DB_PASSWORD']",
    "password = settings.DB_PASSWORD",
    "password: str",
    "password: Optional[str] = None",
    "def login(user, password):",
    "if not password:",
    "token = None",
    "auth = True",
    "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
    "hf_hub_download(repo_id='x', filename='y')",
    "use_auth_token=True",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    'resolved "https://registry.npmjs.org/x/-/x-1.0.0.tgz#3f786850e387550fdab836ed7e6dc881de23001b"',
    "requests==2.32.3 \\\n"
    "    --hash=sha256:70761cfe03c773ceb22aa2f671b4757976145175cdfca038c02654d061d6dcc6",
    'integrity "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17'
    'LhbZVGedAJv8XZ1tvj5FvSg=="',
    'content-hash = "f4a7d6c5b4a39281716f4a7d6c5b4a39281716f4a7d6c5b4a3928171612345"',
    "id = '123e4567-e89b-12d3-a456-426614174000'",
    "https://example.com:8443/path@v1",
    "git+ssh://git@github.com/org/repo.git@v1.2.3",
    "task-runner-abcdefghijklmnopqrstuvwx",
    "The password must be at least 12 characters long.",
    "Bearer authentication is configured by the gateway.",
    'curl -u "$USER:$PASSWORD" https://x',
    "docker run -u 1000:1000 image",
    "--password-stdin",
    "-----BEGIN CERTIFICATE-----\n" + CERT_BODY + "-----END CERTIFICATE-----\n",
    CERT_BODY,
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDtPq5qKx9Mv7 bob@laptop",
    "import base64, hashlib, hmac",
    "self.signing_algorithm = 'RS256'",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_ordinary_text_is_not_a_secret(text: str) -> None:
    assert find_secrets(text) == ()


PLACEHOLDERS = [
    "REPLACE_ME_IN_PROD",
    "changeme",
    "ChangeMe",
    "<your-key>",
    "<password>",
    "${VAR}",
    "${DB_PASSWORD}",
    "$DB_PASSWORD",
    "{{ var }}",
    "{{ secrets.TOKEN }}",
    "${{ secrets.GITHUB_TOKEN }}",
    "%(x)s",
    "xxxx",
    "XXXXXXXXXXXXXXXX",
    "***",
    "********",
    "example",
    "dummy",
    "test",
    "your-api-key-here",
    "sk-...",
    "sk-xxxxxxxxxxxxxxxxxxxxxxxx",
    "ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    "[REDACTED:password]",
    "",
]


@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholders(value: str) -> None:
    assert is_placeholder(value)
    assert find_secrets(f'password = "{value}"') == ()
    assert find_secrets(f"API_TOKEN={value}") == ()


@pytest.mark.parametrize(
    "value",
    [
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc",  # a real-looking key that contains "test"
        "Test1234Secret!",
        "exampleA9x7Qk2L",
        "hunter2",
        "testtesttest9",
        "dummy-" + "9f8e7d6c5b4a3928",
    ],
)
def test_real_values_with_placeholder_words_are_not_placeholders(value: str) -> None:
    assert not is_placeholder(value)
    assert find_secrets(f'password = "{value}"')


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of ``(?s)(?:a|b|...)``."""
    body = pattern.removeprefix("(?s)(?:").removesuffix(")")
    parts, depth, current, chars = [], 0, "", iter(body)
    for char in chars:
        if char == "\\":
            current += char + next(chars)
            continue
        if char == "[":  # a class: to its closing bracket (no class of ours escapes a "]")
            while char != "]":
                current += char
                char = next(chars)
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _form_alternatives() -> list[str]:
    from vsh_ai.analysis import _secret_values

    return _alternatives(_secret_values._PLACEHOLDER_FORM.pattern)


def test_the_placeholder_form_splits_into_its_alternatives() -> None:
    from vsh_ai.analysis import _secret_values

    alternatives = _form_alternatives()
    assert len(alternatives) == 24
    assert f"(?s)(?:{'|'.join(alternatives)})" == _secret_values._PLACEHOLDER_FORM.pattern


@pytest.mark.parametrize("alternative", _form_alternatives())
@given(data=st.data())
def test_the_placeholder_prefilter_never_hides_a_placeholder_form(
    alternative: str, data: st.DataObject
) -> None:
    """Issue 18: a text dense with secrets asks ``is_placeholder`` for thousands of values;
    a check of their first and last characters skips the regex for values it cannot
    match whole, and must never skip one it matches. Each alternative of the form makes
    its own strings (its RE2 syntax reads alike in Python's re)."""
    from vsh_ai.analysis import _secret_values

    value = data.draw(st.from_regex(f"(?s){alternative}", fullmatch=True))
    if value and _secret_values._PLACEHOLDER_FORM.fullmatch(value) is not None:
        assert _secret_values._could_be_placeholder_form(value), value


@given(st.text(max_size=24) | st.text(alphabet=" -_.aZé1²٣", max_size=8))
def test_letters_and_separators_reads_each_character_as_before(value: str) -> None:
    """Issue 18: the per-character generators of ``is_placeholder`` became two string
    methods in C; the old test is the reference."""
    from vsh_ai.analysis._secret_values import _letters_and_separators

    before = not (
        any(c.isdigit() for c in value) or not all(c.isalpha() or c in " -_." for c in value)
    )
    assert _letters_and_separators(value) == before


# -- encodings keep detection (hypothesis) ---------------------------------------

TOKENS = [
    AWS_ID,
    GITHUB,
    STRIPE,
    PYPI,
    NPM,
    HF,
    GITLAB,
    SLACK_BOT,
    SLACK_APP,
    WHSEC,
    OPENAI,
    GOOGLE,
    JWT,
]
PLAIN_LINES = [*TOKENS, 'password = "Tr0ub4dor3x"', f"aws_secret_access_key = {AWS_SECRET}"]


def _split(secret: str, cuts: list[int], style: int) -> str:
    points = sorted({c % (len(secret) - 1) + 1 for c in cuts})
    pieces = [secret[i:j] for i, j in zip([0, *points], [*points, len(secret)], strict=True)]
    joiners = [" + ", " ", ", ", " . ", "", " || "]
    quote_char = "'" if style % 2 else '"'
    return joiners[style % len(joiners)].join(f"{quote_char}{p}{quote_char}" for p in pieces)


ENCODINGS = ["base64", "base64url", "base64-wrapped", "hex", "hex-escapes", "url", "split", "rot13"]


def _encode(plain: str, encoding: str, cuts: list[int], style: int) -> str:
    data = plain.encode()
    if encoding == "base64":
        return base64.b64encode(data).decode()
    if encoding == "base64url":
        return base64.urlsafe_b64encode(data).decode().rstrip("=")
    if encoding == "base64-wrapped":
        return "\n".join(textwrap.wrap(base64.b64encode(data).decode(), 16 + style % 60))
    if encoding == "hex":
        return data.hex()
    if encoding == "hex-escapes":
        return "".join(f"\\x{b:02x}" for b in data)
    if encoding == "url":
        return quote(plain, safe="")
    if encoding == "split":
        return _split(plain, cuts, style)
    return codecs.encode(plain, "rot13")


SURROUNDINGS = st.sampled_from(
    ["", "x = ", "value: ", "print(", "# note\n", "config['k'] = ", "data=", "  - "]
)


@given(
    plain=st.sampled_from(PLAIN_LINES),
    encoding=st.sampled_from(ENCODINGS),
    cuts=st.lists(st.integers(0, 10_000), min_size=1, max_size=4),
    style=st.integers(0, 1000),
    before=SURROUNDINGS,
    after=st.sampled_from(["", "\n", ")", " # done", "\nother = 1\n"]),
)
def test_a_detected_secret_stays_detected_through_every_encoding(
    plain: str, encoding: str, cuts: list[int], style: int, before: str, after: str
) -> None:
    assert find_secrets(plain), "the plain form is detected"
    if encoding in ("split", "rot13") and plain not in TOKENS:
        plain = plain.split('"')[1] if '"' in plain else plain.split(" = ")[1]
        if encoding == "rot13" or not find_secrets(plain):
            return  # rot13 and pieces are for whole tokens; a bare password has no context
    encoded = _encode(plain, encoding, cuts, style)
    text = before + encoded + after
    found = find_secrets(text)
    assert found, f"{encoding}: {text!r}"
    start = len(before)
    assert any(f.start < start + len(encoded) and f.end > start for f in found)
    assert find_secrets(redact_text(text)[0]) == ()


FRAGMENTS = st.sampled_from(
    [
        *PLAIN_LINES,
        *(s for s, _ in SPELLINGS),
        "password = ",
        '"',
        "'",
        " + ",
        "\n",
        "  ",
        "=",
        ":",
        "@",
        "://",
        "[REDACTED:password]",
        "AKIA",
        "eyJ",
        "sk-",
        base64.b64encode(GITHUB.encode()).decode(),
        _hex(STRIPE),
        "changeme",
        "${VAR}",
    ]
)


@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=12)), max_size=12))
def test_redaction_leaves_no_detected_secret(parts: list[str]) -> None:
    text = "".join(parts)
    redacted, _ = redact_text(text)
    assert find_secrets(redacted) == ()
    assert redacted.count("\n") == text.count("\n")


@given(st.sampled_from(TOKENS), st.sampled_from(["[x:{kind}]", "<{kind}>", "***", "[REDACTED]"]))
def test_custom_masks(token: str, mask: str) -> None:
    redacted, found = redact_text(f"key = {token}\n", mask=mask)
    assert token not in redacted
    assert found
    assert find_secrets(redacted) == ()


# -- API details -----------------------------------------------------------------


def test_find_secret_contains_secret_and_secret_lines() -> None:
    text = f"a = 1\nkey = {AWS_ID}\n\npassword = 'Tr0ub4dor3x'\n"
    assert find_secret(text) == "AWS access key id"
    assert find_secret("nothing here") is None
    assert secret_lines(text) == (2, 4)
    assert contains_secret(text.encode())
    assert contains_secret(b"\xff\xfe" + AWS_ID.encode() + b"\x00\x01")
    assert not contains_secret(b"\x00\x01\x02plain")
    assert not contains_secret("")


def test_decoded_findings_name_their_encoding_and_span_the_source() -> None:
    encoded = base64.b64encode(GITHUB.encode()).decode()
    text = f"x = '{encoded}'"
    (finding,) = find_secrets(text)
    assert finding.encoding == "base64"
    assert text[finding.start : finding.end] == encoded
    (rot,) = find_secrets(codecs.encode(GITHUB, "rot13"))
    assert rot.encoding == "rot13"
    (hexed,) = find_secrets(_hex(STRIPE))
    assert hexed.encoding == "hex"


def test_masks_do_not_look_like_secrets_and_kinds_are_short() -> None:
    for text, _ in SPELLINGS:
        for finding in find_secrets(text):
            assert len(finding.kind) <= 40
            assert find_secrets(f"password = [REDACTED:{finding.kind}]") == ()
            assert find_secrets(f'password = "[REDACTED:{finding.kind}]"') == ()


def test_content_beyond_the_scan_cap_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_secrets, "MAX_SCAN_CHARS", 1000)
    text = "a = 1\n" * 400 + f"key = {AWS_ID}\n"
    found = find_secrets(text)
    assert [f.kind for f in found] == [UNSCANNED]
    assert (found[0].start, found[0].end) == (1000, len(text))
    redacted, _ = redact_text(text)
    assert AWS_ID not in redacted
    assert contains_secret(text), "beyond the cap fails closed"


def test_adversarial_lines_complete() -> None:
    """Linear-time shapes (timed in benchmarks/analysis.py) still return the right answer."""
    for text in ("a." * 20_000, "a" * 40_000, "-" * 40_000, "ab" * 20_000 + AWS_ID):
        found = find_secrets(text)
        assert bool(found) == text.endswith(AWS_ID)


def test_one_detector_no_second_pattern_list() -> None:
    """Secret patterns live only in vsh_ai/analysis: rules, redaction and packets share them."""
    root = Path(__file__).resolve().parents[1] / "vsh_ai"
    vendor = re.compile(r"AKIA|gh\[pousr\]|xox\[|sk_live|BEGIN .{0,40}PRIVATE KEY")
    pending: set[str] = set()
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parent.name != "analysis"
        and str(path.relative_to(root)) not in pending
        and vendor.search(path.read_text())
    ]
    assert offenders == []


def test_long_tokens_are_found_and_hidden_whole() -> None:
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJ" + "a1B2" * 3000 + "." + "c3D4" * 30
    text = f"x = {jwt} y"
    (finding,) = find_secrets(text)
    assert (finding.start, finding.end) == (4, 4 + len(jwt))
    assert "a1B2" not in redact_text(text)[0]


@pytest.mark.parametrize(
    "line",
    [
        '        SECRET_KEY=os.environ["SECRET_KEY"],\n',
        '    SECRET_KEY=os.environ.get("SECRET_KEY"),\n',
        'app.config.update(API_TOKEN=os.getenv("API_TOKEN"))\n',
        '    SECRET_KEY=env("SECRET_KEY"),\n',
    ],
)
def test_an_environment_lookup_passed_as_a_keyword_is_not_a_secret(line: str) -> None:
    # Flask's `app.config.from_mapping(SECRET_KEY=os.environ["SECRET_KEY"])`: the value is
    # code looking the secret up, cut at the quote; flagging it rejected the fix itself.
    assert find_secrets(line) == ()


@pytest.mark.parametrize(
    "line",
    ["SECRET_KEY=hunter2hunter2\n", "PASSWORD=s3cr3t.value(\n", "PASSWORD=os.Xq9prodPW77(\n"],
)
def test_values_that_only_resemble_a_lookup_are_still_secrets(line: str) -> None:
    assert find_secrets(line) != ()
