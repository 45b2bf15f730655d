"""`agentcompass dispatch`: fail-closed single-task dispatch with receipts and stable exit codes
(R-DISP-1..R-DISP-4), driven by the scripted model (its script is keyed by the fixed task id
``dispatch``) in the local environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli, run_cli_process, tree_snapshot

from agentcompass_dagster.dispatch import run as dispatch_module
from agentcompass_dagster.dispatch import run_dispatch
from agentcompass_dagster.dispatch.evidence import usage_summary
from agentcompass_dagster.dispatch.ledger import EventLedger
from agentcompass_dagster.durable.activity import ACTIVITY_FILE
from agentcompass_dagster.plugins.models.usage import turn_usage

SECRET = "sk-" + "A1b2C3d4E5" * 4
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


def bash(command: str, **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}], **turn}


def submit(answer: str, **turn: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": answer}}], **turn}


def write_spec(tmp_path: Path, turns: list[dict[str, Any]], **fields: Any) -> Path:
    """A spec beside its inline scripted model, which records every call it gets in calls.jsonl."""
    model = {
        "id": "scripted",
        "provider": "scripted",
        "params": {"turns": {"dispatch": turns}, "record": str(tmp_path / "calls.jsonl")},
    }
    data: dict[str, Any] = {
        "prompt": "Compute the answer.",
        "model": model,
        "runs_dir": str(tmp_path / "runs"),
        "run_id": "r1",
    }
    data.update(fields)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def model_calls(tmp_path: Path) -> int:
    calls = tmp_path / "calls.jsonl"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def events(run_dir: Path) -> list[str]:
    return [json.loads(line)["event"] for line in (run_dir / "events.jsonl").read_text().splitlines()]


def assert_receipt_on_disk(receipt: dict[str, Any]) -> None:
    assert json.loads((Path(receipt["runDir"]) / "receipt.json").read_text()) == receipt


def test_completed_dispatch_closes_every_piece_of_evidence(tmp_path: Path) -> None:
    """R-DISP-1, R-DISP-2, R-DISP-4: exit 0. A model declared by id in models/, a files dir copied into
    the working dir, a tool call, a schema-valid JSON answer: inputs, ledger (run.started, every agent
    record, run.completed), raw transcript, one record per turn, output, dependencies and a receipt whose
    usage counts cache reads and writes as input."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "solver.yaml").write_text(
        yaml.safe_dump(
            {
                "id": "solver",
                "provider": "scripted",
                "model": "solver-v1",
                "params": {
                    "turns": {
                        "dispatch": [
                            bash(
                                "cat data.txt",
                                usage={"input": 100, "output": 10, "cacheRead": 30, "cacheWrite": 5, "reasoning": 7},
                                cost_usd=0.25,
                            ),
                            submit('{"answer": 42}', usage={"input_tokens": 50, "output_tokens": 4}, cost_usd=0.5),
                        ]
                    }
                },
            }
        )
    )
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "data.txt").write_text("forty-two\n")
    (tmp_path / "answer.schema.json").write_text(json.dumps({"$id": "urn:answer", **SCHEMA}))
    spec = write_spec(
        tmp_path, [], model="solver", files="inputs", output_schema="answer.schema.json", system_prompt="Be brief."
    )

    receipt, code = run_dispatch(spec)

    assert code == 0, receipt
    run_dir = tmp_path / "runs" / "r1"
    assert receipt["status"] == "completed" and receipt["errorCode"] is None and receipt["error"] is None
    assert receipt["runId"] == "r1" and receipt["runDir"] == str(run_dir)
    assert receipt["requestedModelId"] == "solver-v1" and receipt["outputSchemaId"] == "urn:answer"
    assert len(receipt["specSha256"]) == 64
    assert receipt["usage"] == {"inputTokens": 135 + 50, "outputTokens": 14, "cachedTokens": 30, "reasoningTokens": 7}
    assert receipt["totalCostUsd"] == pytest.approx(0.75) and receipt["costComplete"] is True
    assert (receipt["turns"], receipt["modelCallCount"], receipt["toolCallCount"]) == (2, 2, 2)
    assert receipt["actualModelIds"] == ["solver-v1", "solver-v1"] and receipt["durationMs"] >= 0
    assert_receipt_on_disk(receipt)

    assert (run_dir / "system.txt").read_text() == "Be brief."
    assert (run_dir / "prompt.txt").read_text() == "Compute the answer."
    assert yaml.safe_load((run_dir / "spec.yaml").read_text()) == yaml.safe_load(spec.read_text())
    transcript = (run_dir / "agent" / "activity.jsonl").read_text()
    assert "forty-two" in transcript
    names = events(run_dir)
    assert names[0] == "run.started" and names[-1] == "run.completed"
    assert "agent.model_call.completed" in names and "agent.tool_call.completed" in names
    assert names.count("agent.model_call.completed") == 2
    first = json.loads((run_dir / "turns" / "0001.json").read_text())
    assert first["turn"] == 1 and first["model_id"] == "solver-v1" and first["cost_usd"] == 0.25
    assert first["usage"]["input_tokens"] == 135 and first["stop_reason"] == "tool_calls"
    assert sorted(p.name for p in (run_dir / "turns").iterdir()) == ["0001.json", "0002.json"]
    assert json.loads((run_dir / "output.json").read_text()) == {"answer": 42}
    assert (run_dir / "final-message.txt").read_text() == '{"answer": 42}'
    assert json.loads((run_dir / "dependencies.json").read_text()) == [
        {"seq": 1, "tool": "bash", "args": {"command": "cat data.txt"}, "isError": False},
        {"seq": 2, "tool": "submit", "args": {"answer": '{"answer": 42}'}, "isError": False},
    ]


def test_cli_prints_the_receipt_and_exits_with_its_code(tmp_path: Path) -> None:
    """R-DISP-2 end to end: the subprocess prints the receipt JSON and exits 0; without a schema the
    output is the raw final answer; --run-id and --runs-dir override the spec."""
    spec = write_spec(tmp_path, [submit("plain text")])
    proc = run_cli_process("dispatch", spec, "--run-id", "from-cli", "--runs-dir", "elsewhere", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    receipt = json.loads(proc.stdout)
    assert receipt["status"] == "completed" and receipt["runDir"] == str(tmp_path / "elsewhere" / "from-cli")
    assert json.loads((tmp_path / "elsewhere" / "from-cli" / "output.json").read_text()) == "plain text"
    assert receipt["outputSchemaId"] is None


def test_default_run_id_is_generated(tmp_path: Path) -> None:
    """R-DISP-3: without a run id one is generated: dispatch-<UTC yyyymmddThhmmssZ>-<6 hex>."""
    spec = write_spec(tmp_path, [submit("ok")], run_id=None)
    receipt, code = run_dispatch(spec)
    assert code == 0
    prefix, stamp, suffix = receipt["runId"].split("-")
    assert prefix == "dispatch" and len(stamp) == 16 and stamp[8] == "T" and stamp.endswith("Z")
    assert len(suffix) == 6 and int(suffix, 16) >= 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"limits": {"max_turns": 0}}, "limits.max_turns=0"),
        ({"agent": {"max_turns": 3}}, "max_turns: agent limits are declared once"),
        ({"promt": "typo"}, "promt"),
        ({"model": "nonexistent"}, "model='nonexistent': no declaration"),
        ({"environment": "nowhere"}, "environment='nowhere': no declaration "),
        ({"files": "missing-dir"}, "files='missing-dir'"),
    ],
    ids=["limit", "limit-in-agent", "unknown-field", "unknown-model", "unknown-environment", "files"],
)
def test_bad_field_is_spec_invalid(
    tmp_path: Path, fields: dict[str, Any], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """R-DISP-2: exit 2, SPEC_INVALID; one line naming the field, no run directory, no model call."""
    spec = write_spec(tmp_path, [submit("x")], **fields)
    assert run_cli("dispatch", spec) == 2
    receipt = json.loads(capsys.readouterr().out)
    assert receipt["errorCode"] == "SPEC_INVALID" and message in receipt["error"], receipt["error"]
    assert "\n" not in receipt["error"] and receipt["status"] == "failed"
    assert set(receipt) >= {"runId", "runDir", "requestedModelId", "specSha256", "outputSchemaId"}
    assert not (tmp_path / "runs").exists() and model_calls(tmp_path) == 0


@pytest.mark.parametrize(
    ("schema", "message"),
    [(None, "no such file"), ("{not json", "is not JSON"), ('{"type": "nonsense"}', "not a valid JSON Schema")],
    ids=["missing", "not-json", "not-a-schema"],
)
def test_output_schema_must_be_a_readable_valid_schema(tmp_path: Path, schema: str | None, message: str) -> None:
    """R-DISP-2: a missing, unparsable or invalid (Draft 2020-12) output schema is SPEC_INVALID, exit 2."""
    if schema is not None:
        (tmp_path / "out.schema.json").write_text(schema)
    receipt, code = run_dispatch(write_spec(tmp_path, [submit("x")], output_schema="out.schema.json"))
    assert (code, receipt["errorCode"]) == (2, "SPEC_INVALID")
    assert "output_schema='out.schema.json'" in receipt["error"] and message in receipt["error"]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("field", ["prompt", "system_prompt"])
def test_secret_in_a_prompt_is_refused_before_any_model_call(tmp_path: Path, field: str) -> None:
    """R-DISP-3: a secret in the prompt or system prompt is SPEC_INVALID, exit 2, before any model call
    (the scripted model's call record stays absent); the error names the field, never the secret."""
    receipt, code = run_dispatch(write_spec(tmp_path, [submit("x")], **{field: f"use key {SECRET} please"}))
    assert (code, receipt["errorCode"]) == (2, "SPEC_INVALID")
    assert field in receipt["error"] and SECRET not in json.dumps(receipt)
    assert not (tmp_path / "calls.jsonl").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("run_id", ["../escape", "a" * 65, "has space", "..", "ünïcode"])
def test_invalid_run_id(tmp_path: Path, run_id: str) -> None:
    """R-DISP-3: run ids are ASCII letters, digits, '.', '_', '-', at most 64: RUN_ID_INVALID, exit 2."""
    receipt, code = run_dispatch(write_spec(tmp_path, [submit("x")]), run_id=run_id)
    assert (code, receipt["errorCode"]) == (2, "RUN_ID_INVALID") and receipt["runDir"] is None
    assert not (tmp_path / "runs").exists() and not (tmp_path / "escape").exists()


def test_existing_run_id_is_never_overwritten(tmp_path: Path) -> None:
    """R-DISP-3: an existing run id is RUN_ID_EXISTS, exit 5: the earlier run directory stays
    byte-identical (no receipt written into it) and the model is not called again."""
    spec = write_spec(tmp_path, [submit("x")])
    assert run_dispatch(spec)[1] == 0
    run_dir = tmp_path / "runs" / "r1"
    before, calls = tree_snapshot(run_dir), model_calls(tmp_path)
    receipt, code = run_dispatch(spec)
    assert (code, receipt["errorCode"]) == (5, "RUN_ID_EXISTS") and receipt["runDir"] == str(run_dir)
    assert tree_snapshot(run_dir) == before and model_calls(tmp_path) == calls


@pytest.mark.parametrize(
    ("turns", "fields", "error_code", "error"),
    [
        ([{"fail": "upstream said no"}], {}, "MODEL_FAILED", "model call failed: upstream said no"),
        (
            [bash("true"), submit("x")],
            {"limits": {"max_turns": 1}},
            "AGENT_LIMIT_EXCEEDED",
            "limit max_turns=1 reached: 1 model calls used",
        ),
        ([{"tool_calls": [{"name": "python", "arguments": {}}]}], {}, "AGENT_FAILED", "unknown tool 'python'"),
    ],
    ids=["model-error", "limit", "protocol"],
)
def test_agent_failure_says_what_failed(
    tmp_path: Path, turns: list[dict[str, Any]], fields: dict[str, Any], error_code: str, error: str
) -> None:
    """R-DISP-1, R-DISP-2: an agent that did not complete is exit 3, with a code that says why (the
    endpoint, a limit, the tool protocol) and the agent's error; the ledger closes with agent.failed
    and run.failed and the receipt is on disk."""
    receipt, code = run_dispatch(write_spec(tmp_path, turns, **fields))
    assert (code, receipt["errorCode"], receipt["status"]) == (3, error_code, "failed")
    assert error in receipt["error"]
    run_dir = Path(receipt["runDir"])
    assert events(run_dir)[-2:] == ["agent.failed", "run.failed"] and "run.completed" not in events(run_dir)
    assert not (run_dir / "output.json").exists()
    assert_receipt_on_disk(receipt)


def test_secret_in_the_transcript_deletes_it(tmp_path: Path) -> None:
    """R-DISP-3: a model reply holding an API key is RAW_SECRET_DETECTED, exit 5: the raw transcript
    (the whole agent/ dir) is deleted and the secret is nowhere under the run directory."""
    receipt, code = run_dispatch(write_spec(tmp_path, [{"content": f"the key is {SECRET}"}]))
    assert (code, receipt["errorCode"]) == (5, "RAW_SECRET_DETECTED")
    run_dir = Path(receipt["runDir"])
    assert not (run_dir / "agent").exists() and "deleted" in receipt["error"]
    assert all(SECRET.encode() not in p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    assert SECRET not in json.dumps(receipt) and events(run_dir)[-1] == "run.failed"
    assert_receipt_on_disk(receipt)


def test_ordinary_hyphenated_output_keeps_the_transcript(tmp_path: Path) -> None:
    """R-DISP-3 / R-STORE-4: only a real secret refuses a transcript: an agent that prints
    "disk-usage-monitoring-tool" (which holds "sk-") completes, exit 0, and its transcript is kept."""
    turns = [bash("echo disk-usage-monitoring-tool task-runner risk-assessment"), submit("disk-usage-monitoring-tool")]
    receipt, code = run_dispatch(write_spec(tmp_path, turns))
    assert code == 0, receipt
    run_dir = Path(receipt["runDir"])
    assert (
        "disk-usage-monitoring-tool task-runner risk-assessment" in (run_dir / "agent" / "activity.jsonl").read_text()
    )
    assert (run_dir / "final-message.txt").read_text() == "disk-usage-monitoring-tool"


def test_an_echoed_environment_value_is_in_no_file(tmp_path: Path) -> None:
    """R-DISP-3 / R-STORE-4: an environment's env: value is registered as a secret when the spec is
    loaded: a run that never prints it completes; one whose agent echoes it is RAW_SECRET_DETECTED (exit
    5, transcript deleted). Either way the value is in no file of the run directory, spec.yaml included."""
    value = "quokka-zebra-4417"
    environment = {"id": "local", "env": {"DISPATCH_SERVICE_VALUE": value}}
    quiet, code = run_dispatch(
        write_spec(tmp_path, [bash("echo hello"), submit("done")], environment=environment, run_id="quiet")
    )
    assert code == 0, quiet
    echoed, code = run_dispatch(
        write_spec(
            tmp_path, [bash("echo $DISPATCH_SERVICE_VALUE"), submit("done")], environment=environment, run_id="echoed"
        )
    )
    assert (code, echoed["errorCode"]) == (5, "RAW_SECRET_DETECTED"), echoed
    assert not (Path(echoed["runDir"]) / "agent").exists()
    for receipt in (quiet, echoed):
        files = [p for p in Path(receipt["runDir"]).rglob("*") if p.is_file()]
        assert any(p.name == "spec.yaml" for p in files)
        assert all(value.encode() not in p.read_bytes() for p in files)
        assert value not in json.dumps(receipt)


def test_a_transcript_emptied_behind_the_agents_back_is_transcript_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-DISP-1: the agent run completes, then something else empties its transcript (truncated between
    the run's return and its read-back, through the dispatch module's reference to _agent_outcome):
    TRANSCRIPT_EMPTY, exit 3, no output.json, the ledger closes with run.failed and the receipt is on
    disk."""
    real = dispatch_module._agent_outcome
    emptied: list[Path] = []

    async def then_emptied(resolved: Any, agent_dir: Path, ledger: EventLedger) -> Any:
        outcome, failure = await real(resolved, agent_dir, ledger)
        assert failure is None and (agent_dir / ACTIVITY_FILE).read_text().strip(), "the run itself must succeed"
        (agent_dir / ACTIVITY_FILE).write_bytes(b"")
        emptied.append(agent_dir / ACTIVITY_FILE)
        return outcome, failure

    monkeypatch.setattr(dispatch_module, "_agent_outcome", then_emptied)
    receipt, code = run_dispatch(write_spec(tmp_path, [bash("echo hi"), submit("done")]))
    assert (code, receipt["errorCode"], receipt["status"]) == (3, "TRANSCRIPT_EMPTY", "failed"), receipt
    assert receipt["error"] == "the agent run left an empty transcript"
    run_dir = Path(receipt["runDir"])
    assert emptied == [run_dir / "agent" / ACTIVITY_FILE] and model_calls(tmp_path) == 2
    assert not (run_dir / "output.json").exists()
    assert events(run_dir)[-1] == "run.failed" and "run.completed" not in events(run_dir)
    assert_receipt_on_disk(receipt)


@pytest.mark.parametrize(
    ("answer", "message"),
    [("not json at all", "not JSON"), ('{"answer": "forty-two"}', "does not match output_schema at $.answer")],
    ids=["not-json", "schema-mismatch"],
)
def test_output_not_matching_the_schema(tmp_path: Path, answer: str, message: str) -> None:
    """R-DISP-1, R-DISP-2: a final answer that is not JSON or misses the schema is OUTPUT_SCHEMA_INVALID,
    exit 4; the final message is kept as evidence, no output.json is written."""
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    receipt, code = run_dispatch(write_spec(tmp_path, [submit(answer)], output_schema="s.json"))
    assert (code, receipt["errorCode"]) == (4, "OUTPUT_SCHEMA_INVALID") and message in receipt["error"]
    run_dir = Path(receipt["runDir"])
    assert (run_dir / "final-message.txt").read_text() == answer and not (run_dir / "output.json").exists()
    assert (run_dir / "turns" / "0001.json").is_file()
    assert_receipt_on_disk(receipt)


def _fail_writes_to(monkeypatch: pytest.MonkeyPatch, writer: str, name: str) -> None:
    """Disk failure for one file name. We run as root, so chmod cannot block writes: the dispatch
    module's own reference to the atomic writer raises instead."""
    real = getattr(dispatch_module, writer)

    def failing(path: Path, *args: Any, **kwargs: Any) -> None:
        if Path(path).name == name:
            raise OSError(28, "No space left on device")
        real(path, *args, **kwargs)

    monkeypatch.setattr(dispatch_module, writer, failing)


def _fail_events(monkeypatch: pytest.MonkeyPatch, event: str) -> None:
    """Disk failure for one ledger event, injected on EventLedger.append (root ignores chmod)."""
    real = EventLedger.append

    def failing(self: EventLedger, name: str, *args: Any, **kwargs: Any) -> None:
        if name == event:
            raise OSError(5, "Input/output error")
        real(self, name, *args, **kwargs)

    monkeypatch.setattr(EventLedger, "append", failing)


def test_input_write_failure_is_audit_write_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R-DISP-2: prompt.txt cannot be written (OSError injected on dispatch's atomic_write_text):
    AUDIT_WRITE_FAILED, exit 5, no model call, and the receipt is still written into the run dir."""
    _fail_writes_to(monkeypatch, "atomic_write_text", "prompt.txt")
    receipt, code = run_dispatch(write_spec(tmp_path, [submit("x")]))
    assert (code, receipt["errorCode"]) == (5, "AUDIT_WRITE_FAILED") and "OSError" in receipt["error"]
    assert model_calls(tmp_path) == 0 and events(Path(receipt["runDir"])) == ["run.failed"]
    assert_receipt_on_disk(receipt)


def test_failing_to_record_a_failure_is_evidence_persist_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-DISP-4: the model fails and then run.failed cannot be appended (OSError injected on
    EventLedger.append): EVIDENCE_PERSIST_FAILED, exit 5, causeErrorCode keeps MODEL_FAILED; the
    other finalisation writes (agent.failed, the receipt) are still made."""
    _fail_events(monkeypatch, "run.failed")
    receipt, code = run_dispatch(write_spec(tmp_path, [{"fail": "upstream said no"}]))
    assert (code, receipt["errorCode"], receipt["causeErrorCode"]) == (5, "EVIDENCE_PERSIST_FAILED", "MODEL_FAILED")
    assert receipt["finalizationErrorTypes"] == ["OSError"] and "upstream said no" in receipt["error"]
    assert events(Path(receipt["runDir"]))[-1] == "agent.failed"
    assert_receipt_on_disk(receipt)


def test_unwritable_receipt_is_reported_in_the_returned_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R-DISP-2, R-DISP-4: receipt.json cannot be written (OSError injected on dispatch's
    atomic_write_json): the returned receipt says receiptFileWritten false, exit 5, cause kept."""
    _fail_writes_to(monkeypatch, "atomic_write_json", "receipt.json")
    receipt, code = run_dispatch(write_spec(tmp_path, [{"fail": "upstream said no"}]))
    assert (code, receipt["receiptFileWritten"]) == (5, False)
    assert (receipt["errorCode"], receipt["causeErrorCode"]) == ("EVIDENCE_PERSIST_FAILED", "MODEL_FAILED")
    assert not (Path(receipt["runDir"]) / "receipt.json").exists()


def test_ledger_failure_during_the_agent_run_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R-DISP-1: an agent record that cannot reach the ledger (OSError injected on EventLedger.append)
    stops the run before the model is called: EVIDENCE_PERSIST_FAILED, exit 5."""
    _fail_events(monkeypatch, "agent.model_call.in_flight")
    receipt, code = run_dispatch(write_spec(tmp_path, [submit("x")]))
    assert (code, receipt["errorCode"]) == (5, "EVIDENCE_PERSIST_FAILED") and "ledger" in receipt["error"]
    assert model_calls(tmp_path) == 0
    assert_receipt_on_disk(receipt)


def test_unknown_cost_on_one_turn_leaves_the_total_unknown(tmp_path: Path) -> None:
    """R-DISP-4 end to end: one turn without a cost makes totalCostUsd None and costComplete false."""
    spec = write_spec(tmp_path, [bash("true", cost_usd=0.1), submit("x", usage={"input": 3})])
    receipt, code = run_dispatch(spec)
    assert code == 0 and receipt["totalCostUsd"] is None and receipt["costComplete"] is False
    assert json.loads((Path(receipt["runDir"]) / "turns" / "0002.json").read_text())["cost_usd"] is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"input": 10, "cacheRead": 4, "cacheWrite": 3, "output": 2, "reasoning": 1}, (17, 2, 4, 1)),
        ({"input_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 2}, (17, 0, 5, 0)),
        ({"input": "12", "output": "abc", "cacheRead": None, "reasoning": "7.5"}, (12, 0, 0, 0)),
        ({"input": -50, "output": -1, "cacheRead": -3, "cacheWrite": 4}, (4, 0, 0, 0)),
        ({"input": True, "output": False, "cacheRead": True}, (0, 0, 0, 0)),
        ({}, (0, 0, 0, 0)),
        ({"input": [1], "output": {"n": 1}, "reasoning": float("inf")}, (0, 0, 0, 0)),
    ],
    ids=["pi", "anthropic", "dirty-strings", "negative", "bools", "missing-keys", "wrong-types"],
)
def test_usage_arithmetic(raw: dict[str, Any], expected: tuple[int, int, int, int]) -> None:
    """R-DISP-4: input includes cache reads and writes; missing, dirty, negative and boolean values
    count 0, never poisoning the total."""
    totals, _, _ = usage_summary([turn_usage(raw)])
    assert (totals.inputTokens, totals.outputTokens, totals.cachedTokens, totals.reasoningTokens) == expected


def test_usage_totals_sum_turns_and_mark_unknown_cost() -> None:
    """R-DISP-4: totals sum every turn; with one turn's cost unknown the total cost is None and
    costComplete false, never a partial sum; with all known it is their sum."""
    known = [turn_usage({"input": 10, "output": 1}, 0.5), turn_usage({"input": 20, "cacheRead": 5}, 0.25)]
    totals, cost, complete = usage_summary(known)
    assert (totals.inputTokens, totals.outputTokens, totals.cachedTokens) == (35, 1, 5)
    assert cost == pytest.approx(0.75) and complete is True
    _, cost, complete = usage_summary([*known, turn_usage({"input": 1})])
    assert cost is None and complete is False
    _, cost, complete = usage_summary([turn_usage({"input": 1}, -1.0)])
    assert cost is None and complete is False
    totals, cost, complete = usage_summary([])
    assert totals.inputTokens == 0 and cost == 0.0 and complete is True
