"""Fail-closed single-task dispatch (R-DISP-1..R-DISP-4): `agentcompass dispatch SPEC.yaml`.

One prompt, one tool agent run, and evidence that either closes completely or says exactly what failed:

    run_id: fix-readme-typo            # optional (or --run-id); default dispatch-<UTC time>-<6 hex>
    prompt: "Fix the typo in README.md, then submit a JSON summary."
    system_prompt: "You are ..."       # optional; default: the tool agent's
    files: ./repo                      # optional directory copied into the agent's working dir
    model: my-model                    # <resources>/models/<id>.yaml, or an inline model declaration
    environment: local                 # <resources>/environments/<id>.yaml, a provider id, or inline
    agent: {command_timeout_s: 60}     # tool_agent params; checkpoints default off
    limits: {max_turns: 20, max_cost_usd: 1.0}   # the agent's budget, as in a sweep's execution.limits
    output_schema: summary.schema.json # optional JSON Schema (Draft 2020-12) the final answer must meet
    runs_dir: results/dispatch         # optional (or --runs-dir); relative to the current directory

``files`` and ``output_schema`` are relative to the spec's directory; ``<resources>`` is the spec's
directory, or its parent when that is named ``dispatch`` (``resources/dispatch/x.yaml`` names the
declarations of ``resources/``). The agent's task id is always ``dispatch``: a scripted model answers
it from ``params.turns.dispatch`` (or ``"*"``).

Flow, every step fail-closed: load and validate the spec -> refuse secrets in the prompts before any
model call -> check the run id -> reserve ``<runs_dir>/<run_id>`` atomically -> write the inputs ->
ledger ``run.started`` -> run the agent, every activity record also a ledger event -> read the raw
transcript back (a secret deletes it) -> one record per model turn -> validate the structured output ->
final message, output, dependencies -> ``run.completed`` -> receipt.

The run directory:

    spec.yaml, system.txt, prompt.txt    the inputs (redacted copies)
    events.jsonl                         the ledger: run.*, agent.<kind>.<status> (redacted, fsynced)
    agent/activity.jsonl                 the raw transcript, unredacted; deleted with agent/ if it holds a secret
    turns/0001.json ...                  per model turn: model id, usage, cost, stop reason, duration
    final-message.txt, output.json       the final answer and the (schema-validated) output
    dependencies.json                    one entry per tool call: seq, tool, args, isError
    receipt.json                         the receipt, also printed; written for every outcome of a run
                                         directory this dispatch created

Exit codes (R-DISP-2): 0 completed; 2 SPEC_INVALID, RUN_ID_INVALID; 3 the agent did not complete:
AGENT_LIMIT_EXCEEDED (it reached a limit, named in the error), MODEL_FAILED (the endpoint failed), AGENT_FAILED
(it broke the tool protocol), FRAMEWORK_FAILED (this framework failed), TRANSCRIPT_EMPTY;
4 OUTPUT_SCHEMA_INVALID; 5 RUN_ID_EXISTS, AUDIT_WRITE_FAILED, RAW_SECRET_DETECTED, EVIDENCE_PERSIST_FAILED.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from agentcompass_dagster import registry
from agentcompass_dagster.config import (
    EnvironmentConfig,
    HarnessConfig,
    ModelConfig,
    load_yaml,
    resolve_reference,
    validate_declaration,
)
from agentcompass_dagster.durable.activity import (
    ACTIVITY_FILE,
    ActivityError,
    ActivityRecord,
    read_activity,
)
from agentcompass_dagster.environments.base import Environment
from agentcompass_dagster.errors import UserError, field_error
from agentcompass_dagster.harnesses.tool_agent import (
    AgentOutcome,
    AgentRun,
    ToolAgentParams,
    fingerprint,
)
from agentcompass_dagster.models.base import Model, ModelTurn, ToolCall, build_model
from agentcompass_dagster.models.usage import usage_totals
from agentcompass_dagster.runtime.atomic import (
    append_line,
    atomic_write_json,
    atomic_write_text,
)
from agentcompass_dagster.runtime.components import (
    construct_plugin,
    register_declared_secrets,
)
from agentcompass_dagster.runtime.redact import redact
from agentcompass_dagster.runtime.types import AgentLimits, ExecutionPlan, TaskSpec, Usage, utcnow

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_SPEC_INVALID = 2
EXIT_FRAMEWORK_FAILED = 3
EXIT_OUTPUT_INVALID = 4
EXIT_EVIDENCE_FAILED = 5

SPEC_INVALID = "SPEC_INVALID"
RUN_ID_INVALID = "RUN_ID_INVALID"
RUN_ID_EXISTS = "RUN_ID_EXISTS"
AUDIT_WRITE_FAILED = "AUDIT_WRITE_FAILED"
FRAMEWORK_FAILED = "FRAMEWORK_FAILED"
AGENT_LIMIT_EXCEEDED = "AGENT_LIMIT_EXCEEDED"
MODEL_FAILED = "MODEL_FAILED"
AGENT_FAILED = "AGENT_FAILED"
RAW_SECRET_DETECTED = "RAW_SECRET_DETECTED"
TRANSCRIPT_EMPTY = "TRANSCRIPT_EMPTY"
OUTPUT_SCHEMA_INVALID = "OUTPUT_SCHEMA_INVALID"
EVIDENCE_PERSIST_FAILED = "EVIDENCE_PERSIST_FAILED"

TASK_ID = "dispatch"
AGENT_DIR = "agent"
TURNS_DIR = "turns"
RECEIPT = "receipt.json"
FINAL_MESSAGE = "final-message.txt"
_RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _reference_form(value: Any) -> str:
    return "id" if isinstance(value, str) else "inline"


# Declared by id or inline; the discriminator makes a bad inline declaration report only its own fields.
ModelRef = Annotated[Annotated[str, Tag("id")] | Annotated[ModelConfig, Tag("inline")], Discriminator(_reference_form)]
EnvironmentRef = Annotated[
    Annotated[str, Tag("id")] | Annotated[EnvironmentConfig, Tag("inline")], Discriminator(_reference_form)
]


class DispatchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str | None = None
    prompt: str = Field(min_length=1)
    system_prompt: str | None = None
    files: Path | None = None
    model: ModelRef
    environment: EnvironmentRef = "local"
    agent: ToolAgentParams = Field(default_factory=lambda: ToolAgentParams(checkpoints=False))
    limits: AgentLimits = Field(default_factory=AgentLimits)
    output_schema: Path | None = None
    # Beside the sweeps' results, which are git-ignored, not loose in the working directory.
    runs_dir: Path = Path("results/dispatch")

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_params(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        if "system_prompt" in value:
            raise ValueError("declare the system prompt once, as the top-level system_prompt")
        # A dispatch never resumes: checkpoints would only copy the working dir (and any secret in it)
        # beside the transcript.
        return {"checkpoints": False, **value}


@dataclass
class ResolvedSpec:
    """A spec with every reference resolved and every plugin built: nothing left to fail on input."""

    spec: DispatchSpec
    text: str
    sha256: str
    model_config: ModelConfig
    model: Model
    environment: Environment
    plan: ExecutionPlan
    params: ToolAgentParams
    files: Path | None
    schema: Any
    schema_id: str | None


class LedgerEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event: str
    at: str = Field(default_factory=utcnow)
    status: Literal["ok", "error"]
    details: dict[str, Any] = Field(default_factory=dict)


class TurnRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn: int
    model_id: str | None
    usage: dict[str, int]
    cost_usd: float | None
    stop_reason: str | None
    duration_s: float


class Dependency(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int
    tool: str
    args: dict[str, Any]
    isError: bool


class UsageTotals(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputTokens: int = 0
    outputTokens: int = 0
    cachedTokens: int = 0
    reasoningTokens: int = 0


class Receipt(BaseModel):
    """Identity, status and error are always present; the rest only where they apply (dumped unset-free)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["completed", "failed"]
    errorCode: str | None
    error: str | None
    runId: str | None
    runDir: str | None
    specPath: str
    requestedModelId: str | None
    specSha256: str | None
    outputSchemaId: str | None
    causeErrorCode: str | None = None
    finalizationErrorTypes: list[str] | None = None
    receiptFileWritten: bool = True
    usage: UsageTotals | None = None
    totalCostUsd: float | None = None
    costComplete: bool | None = None
    turns: int | None = None
    toolCallCount: int | None = None
    modelCallCount: int | None = None
    actualModelIds: list[str | None] | None = None
    finalMessageSha256: str | None = None
    durationMs: int | None = None


class LedgerWriteError(Exception):
    """The ledger failed while the agent ran: the run must stop, since its events would go unrecorded."""


class OutputInvalid(Exception):
    """The final answer is not the structured output the spec's schema asks for."""


class EventLedger:
    """``events.jsonl``: one redacted line per event, fsynced before ``append`` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, event: str, status: Literal["ok", "error"], details: dict[str, Any] | None = None) -> None:
        record = LedgerEvent(event=event, status=status, details=details or {})
        line = json.dumps(redact(record.model_dump(mode="json")), ensure_ascii=False, separators=(",", ":")) + "\n"
        append_line(self.path, line.encode())

    def agent_record(self, record: ActivityRecord) -> None:
        """The ledger's view of one activity record: what happened, not the bulky payload (the
        transcript keeps that)."""
        data = record.data
        details: dict[str, Any] = {"id": record.id, "seq": record.seq}
        details.update({key: data[key] for key in ("turn", "usage", "command", "exit_code", "error") if key in data})
        if "response" in data:
            turn = ModelTurn.model_validate(data["response"])
            details.update(model_id=turn.model_id, stop_reason=turn.stop_reason,
                           tool_calls=[call.name for call in turn.tool_calls])
        if "call" in data:
            details["tool"] = data["call"].get("name")
        failed = record.status in ("aborted", "interrupted") or bool(data.get("error"))
        try:
            self.append(f"agent.{record.kind}.{record.status}", "error" if failed else "ok", details)
        except OSError as exc:
            raise LedgerWriteError(f"{self.path.name}: {type(exc).__name__}: {exc.strerror or exc}") from exc


def has_secret(value: Any) -> bool:
    """Whether redaction would change ``value``: the same patterns, so detection never disagrees with
    what the writers scrub."""
    return redact(value) != value


def transcript_has_secret(text: str) -> bool:
    """The raw text and each decoded line: JSON escaping can hide a secret from the text patterns (a
    private key's newlines) and a secret-looking key is only visible once decoded."""
    if has_secret(text):
        return True
    for line in text.splitlines():
        try:
            decoded = json.loads(line)
        except ValueError:
            continue
        if has_secret(decoded):
            return True
    return False


def run_id_problem(run_id: str) -> str | None:
    if not _RUN_ID.fullmatch(run_id):
        return "use only ASCII letters, digits, '.', '_' and '-', at most 64 characters"
    if run_id in (".", ".."):
        return "must name a directory of its own, not '.' or '..'"
    return None


def new_run_id() -> str:
    return f"dispatch-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def usage_summary(turns: list[Usage]) -> tuple[UsageTotals, float | None, bool]:
    """Receipt totals over every model turn (R-DISP-4); the arithmetic is models.usage's."""
    total, complete = usage_totals(turns)
    totals = UsageTotals(inputTokens=total.input_tokens, outputTokens=total.output_tokens,
                         cachedTokens=total.cache_read_tokens, reasoningTokens=total.reasoning_tokens)
    return totals, total.cost_usd, complete


def turn_records(records: list[ActivityRecord]) -> list[TurnRecord]:
    out = []
    for record in records:
        if record.kind == "model_call" and record.status == "completed":
            turn = ModelTurn.model_validate(record.data["response"])
            usage = Usage.model_validate(record.data["usage"])
            out.append(TurnRecord(turn=record.data["turn"] + 1, model_id=turn.model_id,
                                  usage=usage.model_dump(exclude={"cost_usd"}), cost_usd=usage.cost_usd,
                                  stop_reason=turn.stop_reason, duration_s=turn.duration_s))
    return out


def dependencies(tool_calls: list[dict[str, Any]]) -> list[Dependency]:
    out = []
    for seq, data in enumerate(tool_calls, start=1):
        call = ToolCall.model_validate(data["call"])
        failed = bool(data.get("error")) or data.get("exit_code") not in (None, 0)
        out.append(Dependency(seq=seq, tool=call.name, args=call.parsed_arguments() or {}, isError=failed))
    return out


def structured_output(final_answer: str, schema: Any) -> Any:
    """The final answer as the run's output: its text, or with a schema, its JSON value meeting it."""
    if schema is None:
        return final_answer
    try:
        value = json.loads(final_answer)
    except ValueError as exc:
        raise OutputInvalid(f"the final answer is not JSON: {exc}") from None
    error = best_match(Draft202012Validator(schema).iter_errors(value))
    if error is not None:
        raise OutputInvalid(f"the final answer does not match output_schema at {error.json_path}: {error.message}")
    return value


def _load_schema(spec: DispatchSpec, base: Path, where: str) -> tuple[Any, str | None]:
    """The schema and its id: its ``$id``, else the digest of the file, so the receipt pins the content."""
    if spec.output_schema is None:
        return None, None
    declared = str(spec.output_schema)
    path = base / spec.output_schema
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise field_error("output_schema", declared, f"no such file {path}", where) from None
    except OSError as exc:
        raise field_error("output_schema", declared, f"cannot read {path}: {exc.strerror}", where) from None
    try:
        schema = json.loads(raw)
        Draft202012Validator.check_schema(schema)
    except ValueError as exc:
        raise field_error("output_schema", declared, f"{path} is not JSON: {exc}", where) from None
    except SchemaError as exc:
        raise field_error("output_schema", declared,
                          f"not a valid JSON Schema (Draft 2020-12): {exc.message}", where) from None
    declared_id = schema.get("$id") if isinstance(schema, dict) else None
    return schema, declared_id if isinstance(declared_id, str) else f"sha256:{hashlib.sha256(raw).hexdigest()}"


def load_spec(path: Path) -> ResolvedSpec:
    """Validate the spec and build what it names; every problem is a one-line UserError."""
    where = str(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of dispatch fields, got {type(data).__name__}")
    spec = validate_declaration(DispatchSpec, data, where)
    raw = path.read_bytes()
    base = path.resolve().parent
    root = base.parent if base.name == "dispatch" else base
    model_config = spec.model if isinstance(spec.model, ModelConfig) else validate_declaration(
        ModelConfig, resolve_reference(root, "models", spec.model, "model", where), f"{where}: model")
    if model_config.provider == "none":
        raise field_error("model.provider", model_config.provider, "a dispatch needs a model it can call", where)
    env_config = spec.environment if isinstance(spec.environment, EnvironmentConfig) else validate_declaration(
        EnvironmentConfig, resolve_reference(root, "environments", spec.environment, "environment", where),
        f"{where}: environment")
    register_declared_secrets(env_config.env, env_config, model_config)
    environment = construct_plugin(f"environment {env_config.id!r}",
                                   registry.environments.get(env_config.provider_id, "environment.provider"),
                                   env_config)
    plan = ExecutionPlan(task_id=TASK_ID, attempt=1, benchmark_id="dispatch", harness_id="tool_agent",
                         environment_id=env_config.id, model_id=model_config.id, agent_limits=spec.limits)
    environment.validate_plan(plan)
    files = base / spec.files if spec.files is not None else None
    if files is not None and not files.is_dir():
        raise field_error("files", str(spec.files), f"{files} is not a directory", where)
    schema, schema_id = _load_schema(spec, base, where)
    params = spec.agent if spec.system_prompt is None else spec.agent.model_copy(
        update={"system_prompt": spec.system_prompt})
    return ResolvedSpec(
        spec=spec, text=raw.decode(errors="replace"), sha256=hashlib.sha256(raw).hexdigest(),
        model_config=model_config, model=construct_plugin(f"model {model_config.id!r}", build_model, model_config),
        environment=environment, plan=plan, params=params, files=files, schema=schema, schema_id=schema_id,
    )


def refuse_secrets(resolved: ResolvedSpec, where: str) -> None:
    """Before any model call: the error names the field, never the value."""
    for field, text in (("system_prompt", resolved.params.system_prompt), ("prompt", resolved.spec.prompt)):
        if has_secret(text):
            raise UserError(f"{where}: {field}: holds what looks like a secret (API key, token, password or "
                            "private key); it is never sent to a model: remove it")


async def run_agent(resolved: ResolvedSpec, durable_dir: Path, ledger: EventLedger) -> AgentOutcome:
    session = await resolved.environment.open(resolved.plan, TaskSpec(id=TASK_ID, input=resolved.spec.prompt))
    try:
        if resolved.files is not None:
            await session.upload_dir(resolved.files, session.workdir)
        harness = HarnessConfig(id="tool_agent", params=resolved.params.model_dump(mode="json"))
        run = AgentRun(resolved.model, resolved.params, resolved.plan.agent_limits, session, task_id=TASK_ID, attempt=1,
                       prompt=resolved.spec.prompt, durable_dir=durable_dir,
                       fingerprint=fingerprint(resolved.plan, harness, resolved.model_config),
                       log_redacted=False, on_record=ledger.agent_record)
        return await run.run()
    finally:
        try:
            await session.close()
        except Exception as exc:  # noqa: BLE001 - a close failure must not hide the run's own outcome
            logger.warning("dispatch: closing the environment failed: %s: %s", type(exc).__name__, exc)


class Dispatch:
    """One dispatch: its identity, the run directory once it is ours, and every exit through ``finish``."""

    def __init__(self, spec_path: Path) -> None:
        self.spec_path = spec_path
        self.identity: dict[str, Any] = {"runId": None, "runDir": None, "specPath": str(spec_path),
                                         "requestedModelId": None, "specSha256": None, "outputSchemaId": None}
        self.run_dir: Path | None = None
        self.ledger: EventLedger | None = None

    def failed(self, code: str, error: str, exit_code: int, *, cause: str | None = None,
               agent_failed: bool = False, final_message: str | None = None) -> tuple[dict[str, Any], int]:
        """Try every finalisation write; if any fails the code becomes EVIDENCE_PERSIST_FAILED and the
        original is kept as the cause (R-DISP-4)."""
        problems: list[str] = []
        if self.run_dir is not None and self.ledger is not None:
            run_dir, ledger = self.run_dir, self.ledger
            steps = []
            if final_message is not None:
                steps.append(lambda: atomic_write_text(run_dir / FINAL_MESSAGE, final_message))
            if agent_failed:
                steps.append(lambda: ledger.append("agent.failed", "error", {"errorCode": code}))
            steps.append(lambda: ledger.append("run.failed", "error", {"errorCode": code, "causeErrorCode": cause}))
            for step in steps:
                try:
                    step()
                except OSError as exc:
                    problems.append(type(exc).__name__)
        receipt = Receipt(status="failed", errorCode=code, error=error, **self.identity)
        if cause is not None:
            receipt.causeErrorCode = cause
        if problems:
            receipt.causeErrorCode = cause or code
            receipt.errorCode = EVIDENCE_PERSIST_FAILED
            receipt.finalizationErrorTypes = sorted(set(problems))
            receipt.error = f"recording the failure failed ({', '.join(receipt.finalizationErrorTypes)}): {error}"
            exit_code = EXIT_EVIDENCE_FAILED
        return self.finish(receipt, exit_code)

    def finish(self, receipt: Receipt, exit_code: int) -> tuple[dict[str, Any], int]:
        """Write the receipt into a run directory of ours (never into someone else's) and return it."""
        if self.run_dir is not None:
            try:
                atomic_write_json(self.run_dir / RECEIPT, receipt.model_dump(mode="json", exclude_unset=True))
            except OSError as exc:
                receipt.receiptFileWritten = False
                receipt.causeErrorCode = receipt.causeErrorCode or receipt.errorCode
                receipt.status, receipt.errorCode = "failed", EVIDENCE_PERSIST_FAILED
                receipt.error = f"{RECEIPT} could not be written ({type(exc).__name__})" + (
                    f": {receipt.error}" if receipt.error else "")
                exit_code = EXIT_EVIDENCE_FAILED
        return redact(receipt.model_dump(mode="json", exclude_unset=True)), exit_code

    async def run(self, run_id: str | None, runs_dir: Path | None) -> tuple[dict[str, Any], int]:
        where = str(self.spec_path)
        try:
            resolved = load_spec(self.spec_path)
            refuse_secrets(resolved, where)
        except UserError as exc:
            return self.failed(SPEC_INVALID, str(exc), EXIT_SPEC_INVALID)
        except OSError as exc:
            return self.failed(SPEC_INVALID, f"{where}: cannot read: {exc.strerror or exc}", EXIT_SPEC_INVALID)
        run_id = run_id or resolved.spec.run_id or new_run_id()
        run_dir = (runs_dir or resolved.spec.runs_dir).absolute() / run_id
        self.identity.update(runId=run_id, requestedModelId=resolved.model_config.model or resolved.model_config.id,
                             specSha256=resolved.sha256, outputSchemaId=resolved.schema_id)
        problem = run_id_problem(run_id)
        if problem is not None:
            return self.failed(RUN_ID_INVALID, f"run_id={run_id!r}: {problem}", EXIT_SPEC_INVALID)
        self.identity["runDir"] = str(run_dir)
        try:
            run_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return self.failed(AUDIT_WRITE_FAILED, f"runs_dir {run_dir.parent}: cannot create: {exc.strerror or exc}",
                               EXIT_EVIDENCE_FAILED)
        try:
            # mkdir is the reservation: of two dispatches with one run id, exactly one gets the directory.
            os.mkdir(run_dir)
        except FileExistsError:
            return self.failed(RUN_ID_EXISTS, f"run_id={run_id!r}: {run_dir} exists; an earlier run's evidence "
                               "is never overwritten", EXIT_EVIDENCE_FAILED)
        except OSError as exc:
            return self.failed(AUDIT_WRITE_FAILED, f"{run_dir}: cannot create: {exc.strerror or exc}",
                               EXIT_EVIDENCE_FAILED)
        self.run_dir, self.ledger = run_dir, EventLedger(run_dir / "events.jsonl")
        try:
            atomic_write_text(run_dir / "spec.yaml", resolved.text)
            atomic_write_text(run_dir / "system.txt", resolved.params.system_prompt)
            atomic_write_text(run_dir / "prompt.txt", resolved.spec.prompt)
        except OSError as exc:
            return self.failed(AUDIT_WRITE_FAILED, f"the run's inputs could not be written ({type(exc).__name__})",
                               EXIT_EVIDENCE_FAILED)
        try:
            self.ledger.append("run.started", "ok", dict(self.identity))
        except OSError as exc:
            return self.failed(EVIDENCE_PERSIST_FAILED, f"run.started could not be recorded ({type(exc).__name__})",
                               EXIT_EVIDENCE_FAILED)
        return await self._execute(resolved, run_dir, self.ledger)

    async def _execute(self, resolved: ResolvedSpec, run_dir: Path, ledger: EventLedger) -> tuple[dict[str, Any], int]:
        agent_dir = run_dir / AGENT_DIR
        outcome: AgentOutcome | None = None
        failure: tuple[str, str, int] | None = None
        try:
            outcome = await run_agent(resolved, agent_dir, ledger)
            if outcome.limit is not None:
                failure = (AGENT_LIMIT_EXCEEDED, outcome.limit.message, EXIT_FRAMEWORK_FAILED)
            elif outcome.error is not None:
                failure = (MODEL_FAILED if outcome.model_failed else AGENT_FAILED, outcome.error, EXIT_FRAMEWORK_FAILED)
        except LedgerWriteError as exc:
            failure = (EVIDENCE_PERSIST_FAILED, f"the ledger failed during the agent run: {exc}", EXIT_EVIDENCE_FAILED)
        except Exception as exc:  # noqa: BLE001 - a plugin's failure is this run's outcome, reported, not raised
            failure = (FRAMEWORK_FAILED, f"the agent run raised {type(exc).__name__}: {exc}", EXIT_FRAMEWORK_FAILED)
        cause = failure[0] if failure is not None else None
        agent_failed = failure is not None

        transcript = agent_dir / ACTIVITY_FILE
        try:
            text = transcript.read_text(encoding="utf-8") if transcript.exists() else ""
        except (OSError, UnicodeError) as exc:
            return self.failed(EVIDENCE_PERSIST_FAILED, f"the transcript could not be read back ({type(exc).__name__})",
                               EXIT_EVIDENCE_FAILED, cause=cause, agent_failed=agent_failed)
        if transcript_has_secret(text):
            error = "the agent transcript holds what looks like a secret (API key, token, password or private key)"
            try:
                shutil.rmtree(agent_dir)
                error += "; it was deleted, not kept"
            except OSError as exc:
                error += f"; deleting {agent_dir} FAILED ({type(exc).__name__}): remove it by hand"
            return self.failed(RAW_SECRET_DETECTED, error, EXIT_EVIDENCE_FAILED, cause=cause, agent_failed=agent_failed)
        # AgentRun logs its session before any call, so an empty transcript means something else emptied it.
        if failure is None and not text.strip():
            return self.failed(TRANSCRIPT_EMPTY, "the agent run left an empty transcript", EXIT_FRAMEWORK_FAILED)
        try:
            records = read_activity(transcript)
            (run_dir / TURNS_DIR).mkdir(exist_ok=True)
            for turn in turn_records(records):
                atomic_write_json(run_dir / TURNS_DIR / f"{turn.turn:04d}.json", turn)
        except (OSError, ActivityError) as exc:
            return self.failed(EVIDENCE_PERSIST_FAILED, f"the per-turn records could not be written "
                               f"({type(exc).__name__})", EXIT_EVIDENCE_FAILED, cause=cause, agent_failed=agent_failed)
        if failure is not None:
            code, error, exit_code = failure
            return self.failed(code, error, exit_code, agent_failed=True,
                               final_message=outcome.final_answer if outcome is not None else None)
        assert outcome is not None  # no failure means run_agent returned one

        final_answer = outcome.final_answer or ""
        try:
            output = structured_output(final_answer, resolved.schema)
        except OutputInvalid as exc:
            return self.failed(OUTPUT_SCHEMA_INVALID, str(exc), EXIT_OUTPUT_INVALID, final_message=final_answer)
        try:
            atomic_write_text(run_dir / FINAL_MESSAGE, final_answer)
            atomic_write_json(run_dir / "output.json", output)
            atomic_write_json(run_dir / "dependencies.json",
                              [d.model_dump(mode="json") for d in dependencies(outcome.tool_calls)])
        except OSError as exc:
            return self.failed(AUDIT_WRITE_FAILED, f"the run's results could not be written ({type(exc).__name__})",
                               EXIT_EVIDENCE_FAILED)

        usage, total_cost, cost_complete = usage_summary(outcome.turns)
        receipt = Receipt(
            status="completed", errorCode=None, error=None, **self.identity,
            usage=usage, totalCostUsd=total_cost, costComplete=cost_complete, turns=len(outcome.turns),
            toolCallCount=len(outcome.tool_calls),
            modelCallCount=sum(1 for r in records if r.kind == "model_call" and r.status == "in_flight"),
            actualModelIds=outcome.model_ids,
            finalMessageSha256=hashlib.sha256(final_answer.encode()).hexdigest(),
            durationMs=round(outcome.duration_s * 1000),
        )
        try:
            ledger.append("run.completed", "ok", receipt.model_dump(
                mode="json", include={"usage", "totalCostUsd", "costComplete", "turns", "toolCallCount",
                                      "modelCallCount", "actualModelIds", "finalMessageSha256", "durationMs"}))
        except OSError as exc:
            return self.failed(EVIDENCE_PERSIST_FAILED, f"run.completed could not be recorded ({type(exc).__name__})",
                               EXIT_EVIDENCE_FAILED)
        return self.finish(receipt, EXIT_OK)


async def dispatch(spec_path: str | Path, *, run_id: str | None = None,
                   runs_dir: str | Path | None = None) -> tuple[dict[str, Any], int]:
    """Run one dispatch; every controlled failure is a receipt and an exit code, never an exception."""
    return await Dispatch(Path(spec_path)).run(run_id, Path(runs_dir) if runs_dir is not None else None)


def run_dispatch(spec_path: str | Path, *, run_id: str | None = None,
                 runs_dir: str | Path | None = None) -> tuple[dict[str, Any], int]:
    return asyncio.run(dispatch(spec_path, run_id=run_id, runs_dir=runs_dir))
