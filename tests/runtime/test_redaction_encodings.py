"""Redaction by value in every encoding (R-STORE-4, issue 37 finding 7): a registered secret is scrubbed
raw, reversed, hex, base64 (alone or inside a longer stream), URL-encoded, spaced out and folded over
lines; the host's secret-named variables are registered; a secret-looking assignment after an escaped
line break is scrubbed; a path named after a secret reaches no checkpoint manifest."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from scripted_agent import bash, submit, sweep_file
from test_redaction_corpus import ORDINARY

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.durable.checkpoints import CheckpointStore
from agentcompass_dagster.reporting.report import write_report
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store import redact as redact_module
from agentcompass_dagster.runtime.store.redact import (
    REDACTED,
    redact,
    redact_text,
    register_host_secrets,
    register_secret,
)

PASSWORD = "hunter2+Zq9-xyz"
HOST_TOKEN = "host-only-value-5e8d1c"
UNLISTED = "Unlisted-77kq"


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered secrets are process-wide: each test here starts from none and leaves none behind."""
    monkeypatch.setattr(redact_module, "_known", set())
    monkeypatch.setattr(redact_module, "_known_forms", None)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _folded(text: str, width: int) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


DATA = PASSWORD.encode()
FORMS = {
    "raw": PASSWORD,
    "reversed": PASSWORD[::-1],
    "base64": _b64(DATA),
    "base64 unpadded": _b64(DATA).rstrip("="),
    "urlsafe base64": base64.urlsafe_b64encode(DATA).decode(),
    "base64 at offset 1 in a stream": _b64(b"x" + DATA + b"tail"),
    "base64 at offset 2 in a stream": _b64(b"xy" + DATA + b"tail"),
    "base64 of the value and a line break": _b64(DATA + b"\n"),
    "base64 folded at 8 columns": _folded(_b64(b"x" + DATA * 2), 8),
    "hex": DATA.hex(),
    "HEX": DATA.hex().upper(),
    "hex bytes spaced": " ".join(f"{byte:02x}" for byte in DATA),
    "URL-encoded": quote(PASSWORD, safe=""),
    "URL-encoded with +": quote_plus(PASSWORD),
    "URL-encoded lower-case escapes": quote(PASSWORD, safe="").replace("%2B", "%2b"),
    "spaced": " ".join(PASSWORD),
    "reversed and spaced": " ".join(PASSWORD[::-1]),
    "folded over lines": _folded(PASSWORD, 5),
    "folded with CRLF and tabs": "hunter2\r\n\t+Zq9-\txyz",
    "escaped line break (JSON)": json.dumps(_folded(PASSWORD, 7))[1:-1],
    "escaped twice": "hunter2\\\\n+Zq9-xyz",
}


def _renderings(form: str) -> set[str]:
    """How a form reads in a file: as printed, inside a JSON string, on an HTML page."""
    return {form, json.dumps(form)[1:-1], html.escape(form)}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_form_of_a_registered_value_is_scrubbed(name: str) -> None:
    """R-STORE-4, issue 37: each form of a registered value, in a line of ordinary output, is replaced;
    the words around it stay."""
    register_secret(PASSWORD)
    out = redact_text(f"before {FORMS[name]} after")
    assert FORMS[name] not in out and REDACTED in out, out
    assert out.startswith("before ") and out.endswith(" after"), out
    assert redact({"log": [FORMS[name]]})["log"][0].count(REDACTED) >= 1


def test_short_secrets_leave_ordinary_text_alone() -> None:
    """R-STORE-4: registered values of the shortest length kept (6) do not make their derived forms
    (base64 cores of 7 characters, hex, reversals) scrub ordinary text: the corpus comes out unchanged."""
    for value in ("x7Kq2p", "Zebra9", "271828", "pa$$w0"):
        register_secret(value)
    changed = [text for text in ORDINARY if redact_text(text) != text]
    assert changed == []
    register_secret("abcde")  # too short: neither it nor any of its forms is registered
    assert redact_text("abcde edcba YWJjZGU= 6162636465") == "abcde edcba YWJjZGU= 6162636465"


def test_a_whitespace_only_difference_is_not_a_secret() -> None:
    """A value that is mostly spaces has no form long enough to look for: 'a b c' is not scrubbed from
    every 'abc'."""
    register_secret("a  b  c")
    assert redact_text("abc and a b c") == "abc and a b c"


def test_an_assignment_after_an_escaped_line_break_is_scrubbed() -> None:
    """R-STORE-4, issue 37: in escaped text (a JSON dump, a repr) the "n" of "\\n" runs into the name
    after it; the assignment is still recognised, and a key shape after an escaped break too."""
    out = redact_text(f"config loaded\\npassword: {UNLISTED}\\r\\ntoken={UNLISTED}x\\tapi_key: sk-abcdefghijklmnop1234")
    assert UNLISTED not in out and "sk-abcdefghijklmnop1234" not in out, out
    assert out.startswith("config loaded\\npassword: [REDACTED]"), out
    shape = redact_text("lines\\nsk-abcdefghijklmnop1234")
    assert shape == "lines\\n[REDACTED]"


def test_the_host_secret_named_variables_are_registered() -> None:
    """R-STORE-4, issue 37: the values of host variables named like secrets are registered, those of
    other variables are not."""
    register_host_secrets(
        {
            "AGENTCOMPASS_TEST_SECRET_TOKEN": HOST_TOKEN,
            "SECRET_KEY_BASE": "rails-base-0a9f3e",
            "DB_PASSWORD": "db-pass-77x2",
            "STRIPE_KEY": "stripe-9a8b7c6d",
            "PATH": "/usr/local/bin:/usr/bin",
            "TOKENIZERS_PARALLELISM": "falsefalse",
            "HOME": "/home/someone",
        }
    )
    text = (
        f"{HOST_TOKEN} rails-base-0a9f3e db-pass-77x2 stripe-9a8b7c6d /usr/local/bin:/usr/bin falsefalse /home/someone"
    )
    assert (
        redact_text(text)
        == f"{REDACTED} {REDACTED} {REDACTED} {REDACTED} /usr/local/bin:/usr/bin falsefalse /home/someone"
    )
    assert redact_text(_b64(HOST_TOKEN.encode())) == REDACTED


def test_a_path_named_after_a_secret_is_left_out_of_checkpoints(tmp_path: Path) -> None:
    """R-STORE-4 / R-CKPT-2, issue 37: a directory or file named after a registered secret (or holding a
    key shape) is not in the manifest, like a credential path; restore brings back the rest, and keeps
    the live one where there is one (its name could not be restored from a redacted manifest)."""
    register_secret(PASSWORD)
    home, work = tmp_path / "home", tmp_path / "work"
    (home / PASSWORD).mkdir(parents=True)
    (home / PASSWORD / "note.txt").write_text("kept live\n")
    (home / "notes.txt").write_text("ordinary\n")
    work.mkdir()
    (work / f"{PASSWORD[::-1]}.txt").write_text("x\n")
    (work / "sk-abcdefghijklmnop1234.pem.txt").write_text("x\n")
    store = CheckpointStore(tmp_path / "store")
    manifest = store.capture(1, {"home": home, "work": work})
    assert set(manifest.roots["home"]) == {"notes.txt"} and manifest.roots["work"] == {}
    assert manifest.excluded == 3 and PASSWORD not in manifest.dirs["home"]
    for path in (tmp_path / "store").rglob("*"):
        if path.is_file():
            for form in (PASSWORD, PASSWORD[::-1], "sk-abcdefghijklmnop1234"):
                assert form.encode() not in path.read_bytes(), path
    fresh_home, fresh_work = tmp_path / "fresh-home", tmp_path / "fresh-work"
    store.restore(1, {"home": fresh_home, "work": fresh_work})
    assert sorted(p.name for p in fresh_home.iterdir()) == ["notes.txt"] and list(fresh_work.iterdir()) == []
    (home / "notes.txt").write_text("changed\n")
    store.restore(1, {"home": home, "work": work})
    assert (home / "notes.txt").read_text() == "ordinary\n"
    assert (home / PASSWORD / "note.txt").read_text() == "kept live\n"


# The agent prints the password of its env in every form, and names a home directory and a file after it.
PRINT_FORMS = r"""python3 - <<'EOF'
import base64, json, os, urllib.parse
p = os.environ["PASSWORD"]
b = p.encode()
print(base64.b64encode(b).decode(), base64.urlsafe_b64encode(b).decode().rstrip("="))
print(base64.b64encode(b"x" + b + b"tail").decode(), base64.b64encode(b"xy" + b + b"tail").decode())
print(b.hex(), b.hex().upper(), " ".join(f"{c:02x}" for c in b))
print(urllib.parse.quote(p, safe=""), urllib.parse.quote_plus(p))
print(p[::-1])
print(" ".join(p))
print("\n".join(p[i:i + 5] for i in range(0, len(p), 5)))
print(json.dumps(p[:7] + "\n" + p[7:]))
EOF
printf 'x%s%s' "$PASSWORD" "$PASSWORD" | base64 -w 8
mkdir -p "$HOME/$PASSWORD" && echo "$PASSWORD" > "$HOME/$PASSWORD/note.txt" && touch "$PASSWORD.txt"
"""


def _everything_written(results: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(results.rglob("*")) if path.is_file() and not path.is_symlink()}


def _assert_in_no_file(files: dict[Path, bytes], forms: dict[str, str]) -> None:
    leaks = [
        f"{name} in {path}"
        for path, data in files.items()
        for name, form in forms.items()
        if any(rendering.encode() in data for rendering in _renderings(form))
    ]
    assert leaks == []


def test_a_password_from_env_is_in_no_file_in_any_encoding(tmp_path: Path) -> None:
    """R-STORE-4, issue 37: an agent prints the password of the sweep's env base64- (alone, in a stream,
    folded), hex-, URL-encoded, reversed, spaced, folded and JSON-escaped, and names a $HOME directory and
    a file after it: no form is in any file of the results (details, activity log, the trajectory page,
    checkpoint manifests)."""
    turns = {"count-errors": [bash(PRINT_FORMS), submit()]}
    sweep = sweep_file(tmp_path, turns, environment={"id": "local", "env": {"PASSWORD": PASSWORD}})
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    run_dir = Path(outcome.result.run_dir)
    write_report(tmp_path / "results")
    files = _everything_written(tmp_path / "results")
    assert {"activity.jsonl", "count-errors_qa.json", "run.log", "00000002.json"} <= {path.name for path in files}
    assert any(p.suffix == ".html" and "trajectories" in p.parts for p in files)
    _assert_in_no_file(files, {**FORMS, "base64 folded by the agent": _folded(_b64(b"x" + DATA * 2), 8)})
    store = CheckpointStore(next(run_dir.rglob("count-errors@1")) / "checkpoints")
    assert store.manifest(store.latest()).excluded == 2  # the home directory and the file named after it
    detail = json.loads(next(data for path, data in files.items() if path.name == "count-errors_qa.json"))
    assert json.dumps(detail).count(REDACTED) >= 10


def test_a_host_secret_echoed_by_the_model_is_in_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R-STORE-4, issue 37: a secret-named variable of the host the run starts from, which no declaration
    names, is echoed by the model (in its text, its command and its answer), and an unregistered password
    follows an escaped line break in its text: neither is in any file of the results."""
    monkeypatch.setenv("AGENTCOMPASS_TEST_SECRET_TOKEN", HOST_TOKEN)
    content = f"The token is {HOST_TOKEN}; the config said\\npassword: {UNLISTED}"
    turns = {"count-errors": [{**bash(f"echo {HOST_TOKEN[::-1]}"), "content": content}, submit(HOST_TOKEN)]}
    sweep = sweep_file(tmp_path, turns)
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    write_report(tmp_path / "results")
    files = _everything_written(tmp_path / "results")
    assert any(p.name == "activity.jsonl" for p in files) and any(p.suffix == ".html" for p in files)
    _assert_in_no_file(files, {"host token": HOST_TOKEN, "reversed": HOST_TOKEN[::-1], "unlisted": UNLISTED})
