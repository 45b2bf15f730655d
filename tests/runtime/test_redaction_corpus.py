"""Redaction that is exact (R-STORE-4): a corpus of ordinary strings that must come out unchanged, a
corpus of secret shapes that must never survive, and the runtime's own secrets (the model key, an
environment's env values, URL passwords) kept out of every file end to end."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, write_sweep
from fake_openai import FakeOpenAI, fake_openai_server, tool_call  # noqa: F401

from agentcompass_dagster.dispatch.evidence import has_secret, transcript_has_secret
from agentcompass_dagster.durable.checkpoints import CheckpointStore
from agentcompass_dagster.runtime.store import redact as redact_module
from agentcompass_dagster.runtime.store.redact import (
    REDACTED,
    redact,
    redact_text,
    register_secret,
)


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered secrets are process-wide: each test here starts from none and leaves none behind."""
    monkeypatch.setattr(redact_module, "_known", set())
    monkeypatch.setattr(redact_module, "_known_forms", None)


def _blobs_with_sk_inside(count: int, urlsafe: bool) -> list[str]:
    """Seeded base64(url) blobs with ``sk-`` (or ``sk``) in the middle, never at a word start."""
    rng = random.Random(4 if urlsafe else 64)
    out = []
    for _ in range(count):
        raw = bytes(rng.randrange(256) for _ in range(33))
        encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
        text = encode(raw).decode()
        out.append(f"{text[:12]}sk-{text[12:]}" if urlsafe else f"{text[:12]}sk{text[12:]}")
    return out


HYPHENATED = [
    "disk-usage-monitoring-tool",
    "task-runner",
    "task-runner-for-everything-2024",
    "risk-assessment",
    "risk-assessment-framework-v2",
    "mask-rcnn",
    "mask-rcnn-resnet50-fpn-coco",
    "whisk-taker",
    "whisk-taker-2",
    "desk-booking-service-api",
    "kiosk-mode-enabled",
    "brisk-walk-counter",
    "flask-sqlalchemy-migrations",
    "dusk-till-dawn-scheduler",
    "husk-removal-pipeline-stage",
    "asterisk-pbx-config-generator",
    "ask-me-anything-session-42",
    "task-queue-worker-prefetch-multiplier",
    "disk-io-latency-p99-alert",
    "risk-free-rate-adjusted-returns",
    "use-the-disk-usage-monitoring-tool-daily",
    "sk-learn",
    "tusk-act-2",
    "basilisk-config-loader",
    "obelisk-render-engine-v3",
    "pre-commit-hooks",
    "end-to-end-tests",
    "state-of-the-art",
    "well-known-endpoints",
    "token-bucket-rate-limiter",
    "secret-santa-draw",
    "password-strength-meter",
    "bearer-bond-pricing",
    "basic-auth-docs",
]
PATHS = [
    "/home/user/project",
    "/home/user/project/src/main.py",
    "~/.config/x/settings.toml",
    "/etc/ssl/certs",
    "./tokenizer.json",
    "models/tokenizer_config.json",
    "password_reset.py",
    "api_key_loader.py",
    "C:\\Users\\alice\\Documents\\report.docx",
    "/var/log/nginx/access.log",
    "/tmp/pytest-of-root/pytest-0",
    "src/secrets_manager/README.md",
    "/usr/local/lib/python3.11/site-packages/openai/_client.py",
    "s3://bucket/datasets/train-00000-of-00004.parquet",
    "https://example.com/docs/authentication#bearer",
    "https://huggingface.co/bert-base-uncased/resolve/main/config.json",
    "git@github.com:org/repo.git",
    "http://127.0.0.1:11434/v1",
    "file:///home/user/notes.txt",
    "../risk-assessment/notes.md",
]
MODEL_NAMES = [
    "bert-base-uncased",
    "gpt-4o-mini",
    "gpt-4o-2024-08-06",
    "claude-3-5-sonnet",
    "claude-3-5-sonnet-20241022",
    "claude-3-opus-20240229",
    "qwen2.5-coder:7b",
    "llama-3.1-8b-instruct",
    "mistral-7b-instruct-v0.3",
    "text-embedding-3-small",
    "o1-preview",
    "deepseek-coder-v2-lite-instruct",
    "gemma-2-9b-it",
    "sentence-transformers/all-MiniLM-L6-v2",
    "facebook/opt-1.3b",
    "microsoft/phi-3-mini-4k-instruct",
    "meta-llama/Meta-Llama-3-70B-Instruct",
    "distilbert-base-uncased-finetuned-sst-2-english",
    "whisper-large-v3",
    "stable-diffusion-xl-base-1.0",
]
GIT_HASHES = (
    [hashlib.sha1(str(i).encode()).hexdigest() for i in range(10)]
    + [hashlib.sha256(str(i).encode()).hexdigest() for i in range(5)]
    + ["32fbcc2", "50ed513", "1843aa2"]
)
UUIDS = [str(uuid.UUID(int=random.Random(i).getrandbits(128), version=4)) for i in range(10)] + [
    str(uuid.uuid5(uuid.NAMESPACE_DNS, "example.com"))
]
BLOBS = _blobs_with_sk_inside(12, urlsafe=True) + _blobs_with_sk_inside(6, urlsafe=False)
PROSE = [
    "It needs a basic understanding of bearer tokens. Basic usage first.",
    "a basic 1st-grade math",
    "a basic 2nd-grade reading list and basic 3rd-party integrations",
    "Basic arithmetic: 2 + 2 = 4.",
    "BASIC was the first language I learned.",
    "Bearer tokens are short-lived; refresh them before they expire.",
    "Bearer authentication is defined in RFC 6750.",
    "The bearer of this letter is a friend.",
    "The tokenizer splits the text into 512 tokens.",
    "Token counts: 1200 input, 300 output.",
    "Each token costs $0.000002.",
    "The secret to good tests is determinism.",
    "the secret: patience",
    "Keep the secret sauce secret.",
    "Reset your password from the settings page.",
    "The password must have at least 12 characters.",
    "password: see the vault",
    "Enter your password: then press Enter.",
    "No credentials were found; falling back to anonymous access.",
    "The session key rotates every hour.",
    "Use an API key from the dashboard, not a password.",
    "She took the token from the cookie jar.",
    "My secretary, Alice Johnson, booked the room.",
    "The oauth flow redirects to /callback.",
    "auth: none",
    "auth: required",
    "max_tokens: 4096",
    "token: 42 tokens used",
    "Tokens per second: 87.5",
    "Authentication failed for user alice (wrong password).",
    "a bearer bond, a basic income, a secret garden, a password manager",
    "The model scored 87.5% on the basic split and 61.2% on the hard one.",
    "Run the disk-usage-monitoring-tool every night at 02:00.",
    "I asked whether the task-runner can skip risk-assessment steps.",
    "The whisk-taker and the mask-rcnn model share nothing.",
]
CODE = [
    "token = tokenizer.encode(text)",
    "tokens = tokenizer(text)['input_ids']",
    "password = getpass.getpass()",
    "password = input('Password: ')",
    "api_key: str | None = None",
    "token: Optional[str] = None",
    "if not password:",
    "secret = os.environ['APP_SECRET']",
    "secret = self.apiKey",
    "api_key = config.openai.api_key",
    "export OPENAI_API_KEY=$OPENAI_API_KEY",
    "docker run -e HF_TOKEN=${HF_TOKEN} image",
    "login(user=user, password=password)",
    'mask_token = "[MASK]"',
    'pad_token: "<pad>"',
    'bos_token = "<|endoftext|>"',
    "max_token=100000",
    "max_new_tokens=512",
    "secret=secrets.token_hex(16)",
    "auth=(user, password)",
    "headers = {'Authorization': f'Bearer {token}'}",
    "if password == expected:",
    "token_type = 'bearer'",
    "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
    "cookiecutter_template = 'gh:audreyfeldroy/cookiecutter-pypackage'",
    "pwd = os.getcwd()",
    "credentials: ~/.aws/credentials",
    "private_key_path: /home/user/.ssh/id_ed25519",
    "secret_name: prod/db/password",
]
SNIPPETS = [
    '{"model": "gpt-4o-mini", "temperature": 0.2, "max_tokens": 1024}',
    '{"token_type": "Bearer", "expires_in": 3600, "scope": "read"}',
    '{"usage": {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220}}',
    '{"tokenizer": "bert-base-uncased", "pwd": "/home/user/project", "secretary": "Alice Johnson"}',
    '{"api_key_env": "OPENAI_API_KEY", "base_url": "http://127.0.0.1:11434/v1"}',
    '{"password": {"type": "string", "minLength": 12}}',
    '{"password": "", "token": null}',
    "harness:\n  id: tool_agent\n  params: {max_turns: 30, max_cost_usd: 2.0}",
    "model:\n  id: qwen-local\n  provider: openai_compat\n  api_key_env: OPENAI_API_KEY",
    "token_type: bearer\nexpires_in: 3600",
    '[tool.ruff]\nline-length = 120\ntarget-version = "py311"',
    "[auth]\nmethod = oauth\nprovider = github",
    "LANG=C.UTF-8\nDEBIAN_FRONTEND=noninteractive\nPYTHONUNBUFFERED=1",
    "name: risk-assessment\nsteps:\n  - run: disk-usage-monitoring-tool --all",
    "secrets:\n  - DB_PASSWORD\n  - API_TOKEN",
    "password_min_length = 12\npassword_max_age_days = 90",
    "id,name,score\n1,bert-base-uncased,0.91\n2,gpt-4o-mini,0.88",
    '<meta name="csrf-param" content="authenticity_token">',
    "Set up a basic auth proxy; see https://example.com/docs/basic-auth.",
    "curl -H 'Accept: application/json' https://api.example.com/v1/models",
]
RECORDS: list[dict[str, Any]] = [
    {"tokenizer": "bert-base-uncased"},
    {"pwd": "/home/user/project"},
    {"secretary": "Alice Johnson"},
    {"token_type": "bearer"},
    {"cookiecutter_template": "gh:audreyfeldroy/cookiecutter-pypackage"},
    {"input_tokens": 120, "output_tokens": 30, "cached_tokens": 0, "reasoning_tokens": 7},
    {"max_tokens": 4096, "token_count": 12, "token_budget": 200000, "tokens": [101, 2023, 102]},
    {"api_key_env": "OPENAI_API_KEY", "model": "gpt-4o-mini"},
    {"tokenizer_name": "gpt2", "secret_name": "prod/db", "password_file": "/run/secrets/db"},
    {"oauth": {"provider": "github"}, "auth_url": "https://example.com/login"},
    {"command": "disk-usage-monitoring-tool --json", "output": "task-runner ok\nrisk-assessment ok"},
]
ORDINARY = HYPHENATED + PATHS + MODEL_NAMES + GIT_HASHES + UUIDS + BLOBS + PROSE + CODE + SNIPPETS


def test_the_ordinary_corpus_is_large_enough() -> None:
    """R-STORE-4: the corpus holds at least 200 ordinary strings and 50 secret shapes."""
    assert len(ORDINARY) >= 200 and len(set(ORDINARY)) == len(ORDINARY)
    assert len(SECRETS) >= 50


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_unchanged(text: str) -> None:
    """R-STORE-4: ordinary text (hyphenated words, paths, model names, hashes, blobs with sk- inside,
    UUIDs, prose and code using the words, snippets without secrets) is written as it is, and a dispatch
    would keep a transcript holding it."""
    assert redact_text(text) == text
    assert redact({"text": text, "lines": [text]}) == {"text": text, "lines": [text]}
    assert not has_secret(text) and not transcript_has_secret(json.dumps({"output": text}))


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: next(iter(r)))
def test_ordinary_records_are_unchanged_and_register_nothing(record: dict[str, Any]) -> None:
    """R-STORE-4: keys that only look secret (tokenizer, pwd, secretary, token_type,
    cookiecutter_template, token counts, api_key_env) keep their values, and nothing is registered."""
    assert redact(record) == record
    assert redact_module._known == set()


def test_a_value_under_a_secret_key_is_scrubbed_from_its_record_only() -> None:
    """R-STORE-4: a value under a secret key is redacted in its record and from the rest of that record,
    never registered for the process: later text that holds the same words is untouched."""
    record = {
        "secretary": "Alice Johnson",
        "tokenizer": "bert-base-uncased",
        "pwd": "/home/user/project",
        "api_key": "project-alpha-seven",
        "note": "used project-alpha-seven for bert-base-uncased",
    }
    out = redact(record)
    assert out == {**record, "api_key": REDACTED, "note": f"used {REDACTED} for bert-base-uncased"}
    assert redact_module._known == set()
    for later in ("bert-base-uncased", "/home/user/project", "Alice Johnson", "project-alpha-seven"):
        assert redact_text(later) == later and redact({"x": later}) == {"x": later}


OPENAI = "sk-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kL9nQ2rS5uV8x"
OPENAI_PROJECT = "sk-proj-" + "aB3_dE6-gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kL9nQ2rS5uV8xY1zA4"
ANTHROPIC = "sk-ant-api03-" + "xY7_zQ1-wE4rT6yU8iO0pA2sD5fG7hJ9kL1zX3cV5bN7mQ9wE2rT4yU6iO8pA0sD3fG5hJ7k-AbCdEfAA"
AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_" + "R4nD0mT0k3nV4lu3F0rT3st1ngPurp0s3sXY"
GITHUB_PAT = "github_pat_11ABCDEFG0" + "aBcDeFgHiJkLmNoP_qRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ01"
SLACK = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
HUGGING_FACE = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9x2F3kQw1\nZm9vYmFyYmF6cXV4MTIzNDU2\n"
    "-----END RSA PRIVATE KEY-----"
)
SHAPED = [OPENAI, OPENAI_PROJECT, ANTHROPIC, AWS_ACCESS_KEY_ID, GITHUB, GITHUB_PAT, SLACK, HUGGING_FACE, GOOGLE, JWT]
# Each shape alone, in prose, quoted in JSON, in a dotenv line under an ordinary name, and as a bearer token.
CONTEXTS = [
    "{}",
    "the key is {}.",
    '{{"note": "{}"}}',
    "EXPORTED_VALUE={}",
    "Authorization: Bearer {}",
    "curl -H 'x-custom: {}' https://api.example.com",
]
SECRETS: list[tuple[str, str]] = [(context.format(s), s) for s in SHAPED for context in CONTEXTS] + [
    (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET} && aws s3 ls", AWS_SECRET),
    (f"[default]\naws_access_key_id = {AWS_ACCESS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    (json.dumps({"Credentials": {"AccessKeyId": AWS_ACCESS_KEY_ID, "SecretAccessKey": AWS_SECRET}}), AWS_SECRET),
    (f'{{"aws_secret_access_key": "{AWS_SECRET}"}}', AWS_SECRET),
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("authorization: basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
    ("Authorization: Bearer Zm9vYmFyYmF6cXV4MTIzNDU2", "Zm9vYmFyYmF6cXV4MTIzNDU2"),
    ("Authorization: Bearer zzzzzzzzzzzz", "zzzzzzzzzzzz"),
    ('"Authorization": "Bearer opaque-token-value"', "opaque-token-value"),
    ("send it with Bearer abc123def456ghi789 in the header", "abc123def456ghi789"),
    ("password: hunter2hunter2", "hunter2hunter2"),
    ("The password: hunter2hunter2 was in the log", "hunter2hunter2"),
    ("DB_PASSWORD=Tr0ub4dor&3", "Tr0ub4dor"),
    ('{"password": "s3cr3t-P@ss"}', "s3cr3t-P@ss"),
    ("password = 'CorrectHorseBattery'", "CorrectHorseBattery"),
    ("[server]\nhost = example.com\ntoken = abc123def456\n", "abc123def456"),
    ('token = "abc123def456"  # TOML', "abc123def456"),
    ("SECRET_KEY=django-insecure-9x8y7z6w5v", "django-insecure-9x8y7z6w5v"),
    ("client_secret: Gx7-kP2qR9sT4vW8", "Gx7-kP2qR9sT4vW8"),
    ("api_key=a1b2c3d4e5f6a7b8", "a1b2c3d4e5f6a7b8"),
    ("X-Api-Key: 9f8e7d6c5b4a3f2e", "9f8e7d6c5b4a3f2e"),
    ("https://example.com/cb?access_token=Qw3rTy8uI0oP&state=x", "Qw3rTy8uI0oP"),
    ("accessToken: 'AbCdEf123456'", "AbCdEf123456"),
    ("Cookie: session=4f3c2b1a0e9d8c7b; theme=dark", "4f3c2b1a0e9d8c7b"),
    ("passwd=Zx9!Zx9!Zx9!", "Zx9!Zx9!Zx9!"),
    ("credentials: u5er:pa55w0rd", "u5er:pa55w0rd"),
    ("private_key = MIIEvQIBADANBgkqhkiG9w0BAQEF", "MIIEvQIBADANBgkqhkiG9w0BAQEF"),
    ("clone https://user:pa55word@git.example.com/repo.git", "pa55word"),
    ("postgresql://alice:hunter2secret@db.example.com:5432/app", "hunter2secret"),
    (PEM, "MIIEowIBAAKCAQEA7bq9x2F3kQw1"),
    (f"key file:\n{PEM}\nend", "Zm9vYmFyYmF6cXV4MTIzNDU2"),
]


def _survivors(secret: str, text: str) -> list[str]:
    """Every 8-character piece of the secret still in the text: a partial redaction leaks too."""
    width = min(8, len(secret))
    return [secret[i : i + width] for i in range(len(secret) - width + 1) if secret[i : i + width] in text]


@pytest.mark.parametrize(("text", "secret"), SECRETS, ids=[f"{i:02d}" for i in range(len(SECRETS))])
def test_secret_shapes_never_survive(text: str, secret: str) -> None:
    """R-STORE-4: OpenAI, Anthropic, AWS, GitHub, Slack, Hugging Face, Google keys, JWTs, Authorization
    headers, assignment-style passwords and tokens (dotenv, INI, TOML, YAML, JSON, query strings), URL
    passwords and PEM private keys are redacted in text and in records, and a dispatch refuses them."""
    assert not _survivors(secret, redact_text(text))
    assert not _survivors(secret, json.dumps(redact({"output": text, "nested": [{"text": text}]})))
    assert has_secret(text) and transcript_has_secret(json.dumps({"output": text}))


def test_assignments_keep_the_name_visible() -> None:
    """R-STORE-4: an assignment-style secret loses its value, never its name or the quoting around it."""
    assert redact_text("password: hunter2hunter2") == f"password: {REDACTED}"
    assert redact_text(f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n") == f"AWS_SECRET_ACCESS_KEY={REDACTED}\n"
    assert redact_text("token = abc123def456") == f"token = {REDACTED}"
    assert redact_text('{"password": "s3cr3t-P@ss", "user": "bob"}') == f'{{"password": "{REDACTED}", "user": "bob"}}'
    assert redact_text("Authorization: Basic dXNlcjpwYXNz") == f"Authorization: Basic {REDACTED}"


def test_a_registered_value_never_survives() -> None:
    """R-STORE-4: a value registered with register_secret is scrubbed from every later write, whatever its
    shape; a value too short to be told from ordinary text is not registered."""
    register_secret("corp-vault-passphrase-horse")
    register_secret("abc")
    assert redact_text("echo corp-vault-passphrase-horse > f") == f"echo {REDACTED} > f"
    assert redact({"a": ["x corp-vault-passphrase-horse"]}) == {"a": [f"x {REDACTED}"]}
    assert redact_text("abc") == "abc"


def test_a_credentials_file_in_the_home_is_checkpointed_redacted(tmp_path: Path) -> None:
    """R-STORE-4 / R-CKPT-2: an INI credentials file in the agent's home (token = ..., aws keys) is stored
    redacted in the checkpoint blobs; its ordinary lines are kept."""
    home, fresh = tmp_path / "home", tmp_path / "fresh"
    (home / ".config" / "x").mkdir(parents=True)
    text = f"[default]\nuser = alice\ntoken = abc123def456\naws_secret_access_key={AWS_SECRET}\n"
    (home / ".config" / "x" / "credentials").write_text(text)
    store = CheckpointStore(tmp_path / "store")
    store.capture(1, {"home": home})
    for path in (tmp_path / "store").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"abc123def456" not in data and AWS_SECRET.encode() not in data
    fresh.mkdir()
    store.restore(1, {"home": fresh})
    assert (fresh / ".config" / "x" / "credentials").read_text() == (
        f"[default]\nuser = alice\ntoken = {REDACTED}\naws_secret_access_key={REDACTED}\n"
    )


def test_a_model_key_echoed_by_the_endpoint_is_in_no_file(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-STORE-4: the key read from api_key_env is registered, so when the endpoint echoes it (in its
    replies and in a command the agent runs) its bytes are in no file under the results directory, though
    the key has no shape redaction would recognise."""
    key = "local-deploy-7f3a9c2e51b84d06"
    monkeypatch.setenv("ECHOING_ENDPOINT_KEY", key)
    command = f"echo 'called with {key}'; awk '$3 == \"ERROR\" {{n++}} END {{print n+0}}' app.log > answer.txt"
    fake_openai.reply(content=f"You sent me {key}.", tool_calls=[tool_call("bash", json.dumps({"command": command}))])
    fake_openai.reply(content=f"Still {key}.", tool_calls=[tool_call("submit", json.dumps({"answer": "5"}), "c2")])
    model = {
        "id": "echo",
        "provider": "openai_compat",
        "model": "served-model",
        "base_url": fake_openai.base_url,
        "api_key_env": "ECHOING_ENDPOINT_KEY",
    }
    sweep = write_sweep(
        tmp_path, benchmarks=[{"id": "demo", "tasks": ["count-errors"]}], models=[model], harness="tool_agent"
    )
    assert run_cli("run", sweep, "--direct") == 0
    assert all(r.headers["authorization"] == f"Bearer {key}" for r in fake_openai.requests)
    files = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    detail = json.loads(next(p for p in files if p.parent.name == "details").read_text())
    assert detail["correct"] and f"called with {REDACTED}" in json.dumps(detail)
    for path in files:
        assert key.encode() not in path.read_bytes(), f"the model key was written to {path}"
