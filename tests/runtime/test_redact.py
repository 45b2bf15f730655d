"""Redaction at the persistence boundary (R-STORE-4)."""

from __future__ import annotations

from pathlib import Path

from agentcompass_dagster.runtime.store.redact import REDACTED, redact, redact_text, register_secret

from conftest import run_cli, write_sweep, write_task

API_KEY = "sk-abcdefghijklmnop1234"
URL_PASSWORD = "hunter2secret"
ENV_TOKEN = "tok_9f8e7d6c5b4a"


def test_secrets_in_the_request_never_reach_the_run_directory(tmp_path: Path, dagster_home: Path) -> None:
    """R-STORE-4: an api_key field, an env value and a URL password in the request are absent from every
    file under the run directory (and from Dagster's storage), even where a task echoes the env value
    into its trajectory."""
    write_task(
        tmp_path / "tasks",
        "echo-token",
        solution='echo "token is $API_TOKEN and $SERVICE_URL"\necho ok > out.txt',
        check="test -f out.txt",
    )
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}],
        models=[{"id": "m", "provider": "none", "params": {"api_key": API_KEY}}],
        environment={
            "id": "local",
            "env": {"API_TOKEN": ENV_TOKEN, "SERVICE_URL": f"https://alice:{URL_PASSWORD}@db.example.com/x"},
        },
    )
    assert run_cli("run", sweep) == 0
    files = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    dagster_files = [p for p in dagster_home.rglob("*") if p.is_file()]
    assert dagster_files, "the run went through Dagster"
    files += dagster_files
    assert len(files) >= 6
    for path in files:
        data = path.read_bytes()
        for secret in (API_KEY, URL_PASSWORD, ENV_TOKEN):
            assert secret.encode() not in data, f"{secret} leaked into {path}"
    trajectory = next(p for p in files if p.name == "echo-token_files.json").read_text()
    assert f"token is {REDACTED}" in trajectory and "alice:" in trajectory


def test_redaction_by_key_shape_and_registered_value() -> None:
    """R-STORE-4: keys and values that look secret are replaced recursively; counts are not secrets. A value
    found under a secret key is scrubbed from the rest of its record, not from later writes; a registered
    value is scrubbed from every later write."""
    data = {
        "api_key": "plain-value-123",
        "nested": [{"Authorization": "Bearer abc.def.ghi"}, {"password": 12345}],
        "text": "use ghp_" + "a" * 30 + " then Bearer zzzz1234zzzz",
        "command": "login --key plain-value-123",
        "input_tokens": 120,
        "api_key_env": "OPENAI_API_KEY",
        "credentials": {"user": "bob", "inner": "x9x9x9x9x9"},
    }
    out = redact(data)
    assert out["api_key"] == REDACTED and out["nested"][0]["Authorization"] == REDACTED
    assert out["nested"][1]["password"] == REDACTED
    assert "ghp_" not in out["text"] and "zzzz1234zzzz" not in out["text"]
    assert out["command"] == f"login --key {REDACTED}"
    assert out["input_tokens"] == 120 and out["api_key_env"] == "OPENAI_API_KEY"
    assert out["credentials"] == {"user": REDACTED, "inner": REDACTED}
    assert data["api_key"] == "plain-value-123"
    assert redact_text("echo plain-value-123") == "echo plain-value-123"
    register_secret("another-secret-value")
    assert redact({"log": ["x another-secret-value y"]}) == {"log": [f"x {REDACTED} y"]}


def test_prose_about_bearer_and_basic_is_not_a_secret() -> None:
    """R-STORE-4 / R-DISP-3: prose that mentions the words is kept (a fail-closed dispatch would refuse
    it), while header-style credentials are still scrubbed."""
    from agentcompass_dagster.runtime.store.redact import redact_text

    prose = "It needs a basic understanding of bearer tokens. Basic usage first."
    assert redact_text(prose) == prose
    assert redact_text("Authorization: Basic dXNlcjpwYXNz") == "Authorization: Basic [REDACTED]"
