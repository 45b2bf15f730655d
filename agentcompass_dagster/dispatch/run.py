"""One dispatch from spec to receipt, every step fail-closed (the flow of the package docstring)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.declarations import HarnessConfig
from agentcompass_dagster.dispatch.codes import (
    AGENT_FAILED,
    AGENT_LIMIT_EXCEEDED,
    AUDIT_WRITE_FAILED,
    EVIDENCE_PERSIST_FAILED,
    EXIT_EVIDENCE_FAILED,
    EXIT_FRAMEWORK_FAILED,
    EXIT_OK,
    EXIT_OUTPUT_INVALID,
    EXIT_SPEC_INVALID,
    FRAMEWORK_FAILED,
    MODEL_FAILED,
    OUTPUT_SCHEMA_INVALID,
    RAW_SECRET_DETECTED,
    RUN_ID_EXISTS,
    RUN_ID_INVALID,
    SPEC_INVALID,
    TRANSCRIPT_EMPTY,
)
from agentcompass_dagster.dispatch.evidence import (
    OutputInvalid,
    dependencies,
    structured_output,
    transcript_has_secret,
    turn_records,
    usage_summary,
)
from agentcompass_dagster.dispatch.ledger import EventLedger, LedgerWriteError
from agentcompass_dagster.dispatch.receipt import Receipt
from agentcompass_dagster.dispatch.spec import (
    TASK_ID,
    ResolvedSpec,
    load_spec,
    new_run_id,
    refuse_secrets,
    run_id_problem,
)
from agentcompass_dagster.durable.activity import ACTIVITY_FILE, ActivityError, ActivityRecord, read_activity
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.plugins.harnesses.tool_agent import AgentOutcome, AgentRun, fingerprint
from agentcompass_dagster.runtime.store.atomic import atomic_write_json, atomic_write_text
from agentcompass_dagster.runtime.store.redact import redact
from agentcompass_dagster.contracts.records import TaskSpec
from agentcompass_dagster.runtime.execution.agent_limits import AttemptLimits, LimitedEnvironment, LimitedModel
from agentcompass_dagster.runtime.execution.permits import open_session

logger = logging.getLogger(__name__)

AGENT_DIR = "agent"
TURNS_DIR = "turns"
RECEIPT = "receipt.json"
FINAL_MESSAGE = "final-message.txt"


async def run_agent(resolved: ResolvedSpec, durable_dir: Path, ledger: EventLedger) -> AgentOutcome:
    session = await open_session(resolved.environment, resolved.plan, TaskSpec(id=TASK_ID, input=resolved.spec.prompt))
    try:
        if resolved.files is not None:
            await session.upload_dir(resolved.files, session.workdir)
        harness = HarnessConfig(id="tool_agent", params=resolved.params.model_dump(mode="json"))
        # The spec's limits, enforced as for any attempt: by the model and environment the agent is handed.
        limits = AttemptLimits(resolved.plan.agent_limits)
        run = AgentRun(
            LimitedModel(resolved.model, limits),
            resolved.params,
            LimitedEnvironment(session, limits),
            task_id=TASK_ID,
            attempt=1,
            prompt=resolved.spec.prompt,
            durable_dir=durable_dir,
            fingerprint=fingerprint(resolved.plan, harness, resolved.model_config),
            log_redacted=False,
            on_record=ledger.agent_record,
        )
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
        self.identity: dict[str, Any] = {
            "runId": None,
            "runDir": None,
            "specPath": str(spec_path),
            "requestedModelId": None,
            "specSha256": None,
            "outputSchemaId": None,
        }
        self.run_dir: Path | None = None
        self.ledger: EventLedger | None = None

    def failed(
        self,
        code: str,
        error: str,
        exit_code: int,
        *,
        cause: str | None = None,
        agent_failed: bool = False,
        final_message: str | None = None,
    ) -> tuple[dict[str, Any], int]:
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
                    f": {receipt.error}" if receipt.error else ""
                )
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
        self.identity.update(
            runId=run_id,
            requestedModelId=resolved.model_config.model or resolved.model_config.id,
            specSha256=resolved.sha256,
            outputSchemaId=resolved.schema_id,
        )
        problem = run_id_problem(run_id)
        if problem is not None:
            return self.failed(RUN_ID_INVALID, f"run_id={run_id!r}: {problem}", EXIT_SPEC_INVALID)
        self.identity["runDir"] = str(run_dir)
        refused = self._reserve(run_id, run_dir)
        if refused is not None:
            return refused
        self.run_dir, self.ledger = run_dir, EventLedger(run_dir / "events.jsonl")
        unrecorded = self._record_inputs(resolved, run_dir, self.ledger)
        if unrecorded is not None:
            return unrecorded
        return await self._execute(resolved, run_dir, self.ledger)

    def _reserve(self, run_id: str, run_dir: Path) -> tuple[dict[str, Any], int] | None:
        """Create the run directory, which reserves the run id; the failure's receipt if it cannot be."""
        try:
            run_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return self.failed(
                AUDIT_WRITE_FAILED,
                f"runs_dir {run_dir.parent}: cannot create: {exc.strerror or exc}",
                EXIT_EVIDENCE_FAILED,
            )
        try:
            # mkdir is the reservation: of two dispatches with one run id, exactly one gets the directory.
            os.mkdir(run_dir)
        except FileExistsError:
            return self.failed(
                RUN_ID_EXISTS,
                f"run_id={run_id!r}: {run_dir} exists; an earlier run's evidence is never overwritten",
                EXIT_EVIDENCE_FAILED,
            )
        except OSError as exc:
            return self.failed(
                AUDIT_WRITE_FAILED, f"{run_dir}: cannot create: {exc.strerror or exc}", EXIT_EVIDENCE_FAILED
            )
        return None

    def _record_inputs(
        self, resolved: ResolvedSpec, run_dir: Path, ledger: EventLedger
    ) -> tuple[dict[str, Any], int] | None:
        """The run's inputs written and ``run.started`` in the ledger; the failure's receipt if not."""
        try:
            atomic_write_text(run_dir / "spec.yaml", resolved.text)
            atomic_write_text(run_dir / "system.txt", resolved.params.system_prompt)
            atomic_write_text(run_dir / "prompt.txt", resolved.spec.prompt)
        except OSError as exc:
            return self.failed(
                AUDIT_WRITE_FAILED,
                f"the run's inputs could not be written ({type(exc).__name__})",
                EXIT_EVIDENCE_FAILED,
            )
        try:
            ledger.append("run.started", "ok", dict(self.identity))
        except OSError as exc:
            return self.failed(
                EVIDENCE_PERSIST_FAILED,
                f"run.started could not be recorded ({type(exc).__name__})",
                EXIT_EVIDENCE_FAILED,
            )
        return None

    async def _execute(self, resolved: ResolvedSpec, run_dir: Path, ledger: EventLedger) -> tuple[dict[str, Any], int]:
        agent_dir = run_dir / AGENT_DIR
        outcome, failure = await _agent_outcome(resolved, agent_dir, ledger)
        cause = failure[0] if failure is not None else None
        kept = self._keep_transcript(run_dir, agent_dir, cause)
        if isinstance(kept, tuple):
            return kept
        if failure is not None:
            code, error, exit_code = failure
            return self.failed(
                code,
                error,
                exit_code,
                agent_failed=True,
                final_message=outcome.final_answer if outcome is not None else None,
            )
        assert outcome is not None  # no failure means run_agent returned one
        return self._complete(resolved, run_dir, ledger, outcome, kept)

    def _keep_transcript(
        self, run_dir: Path, agent_dir: Path, cause: str | None
    ) -> list[ActivityRecord] | tuple[dict[str, Any], int]:
        """The transcript read back and checked (a secret deletes it), and one record per model turn
        written; its records, or the failure's receipt."""
        agent_failed = cause is not None
        transcript = agent_dir / ACTIVITY_FILE
        try:
            text = transcript.read_text(encoding="utf-8") if transcript.exists() else ""
        except (OSError, UnicodeError) as exc:
            return self.failed(
                EVIDENCE_PERSIST_FAILED,
                f"the transcript could not be read back ({type(exc).__name__})",
                EXIT_EVIDENCE_FAILED,
                cause=cause,
                agent_failed=agent_failed,
            )
        if transcript_has_secret(text):
            error = "the agent transcript holds what looks like a secret (API key, token, password or private key)"
            try:
                shutil.rmtree(agent_dir)
                error += "; it was deleted, not kept"
            except OSError as exc:
                error += f"; deleting {agent_dir} FAILED ({type(exc).__name__}): remove it by hand"
            return self.failed(RAW_SECRET_DETECTED, error, EXIT_EVIDENCE_FAILED, cause=cause, agent_failed=agent_failed)
        # AgentRun logs its session before any call, so an empty transcript means something else emptied it.
        if cause is None and not text.strip():
            return self.failed(TRANSCRIPT_EMPTY, "the agent run left an empty transcript", EXIT_FRAMEWORK_FAILED)
        try:
            records = read_activity(transcript)
            (run_dir / TURNS_DIR).mkdir(exist_ok=True)
            for turn in turn_records(records):
                atomic_write_json(run_dir / TURNS_DIR / f"{turn.turn:04d}.json", turn)
        except (OSError, ActivityError) as exc:
            return self.failed(
                EVIDENCE_PERSIST_FAILED,
                f"the per-turn records could not be written ({type(exc).__name__})",
                EXIT_EVIDENCE_FAILED,
                cause=cause,
                agent_failed=agent_failed,
            )
        return records

    def _complete(
        self,
        resolved: ResolvedSpec,
        run_dir: Path,
        ledger: EventLedger,
        outcome: AgentOutcome,
        records: list[ActivityRecord],
    ) -> tuple[dict[str, Any], int]:
        """A run the agent completed: its structured output, final message and dependencies, then the
        receipt."""
        final_answer = outcome.final_answer or ""
        try:
            output = structured_output(final_answer, resolved.schema)
        except OutputInvalid as exc:
            return self.failed(OUTPUT_SCHEMA_INVALID, str(exc), EXIT_OUTPUT_INVALID, final_message=final_answer)
        try:
            atomic_write_text(run_dir / FINAL_MESSAGE, final_answer)
            atomic_write_json(run_dir / "output.json", output)
            atomic_write_json(
                run_dir / "dependencies.json", [d.model_dump(mode="json") for d in dependencies(outcome.tool_calls)]
            )
        except OSError as exc:
            return self.failed(
                AUDIT_WRITE_FAILED,
                f"the run's results could not be written ({type(exc).__name__})",
                EXIT_EVIDENCE_FAILED,
            )
        receipt = self._completed_receipt(outcome, records, final_answer)
        try:
            ledger.append(
                "run.completed",
                "ok",
                receipt.model_dump(
                    mode="json",
                    include={
                        "usage",
                        "totalCostUsd",
                        "costComplete",
                        "turns",
                        "toolCallCount",
                        "modelCallCount",
                        "actualModelIds",
                        "finalMessageSha256",
                        "durationMs",
                    },
                ),
            )
        except OSError as exc:
            return self.failed(
                EVIDENCE_PERSIST_FAILED,
                f"run.completed could not be recorded ({type(exc).__name__})",
                EXIT_EVIDENCE_FAILED,
            )
        return self.finish(receipt, EXIT_OK)

    def _completed_receipt(self, outcome: AgentOutcome, records: list[ActivityRecord], final_answer: str) -> Receipt:
        """The receipt of a completed run: its identity, usage and cost totals, counts and final message's
        digest."""
        usage, total_cost, cost_complete = usage_summary(outcome.turns)
        return Receipt(
            status="completed",
            errorCode=None,
            error=None,
            **self.identity,
            usage=usage,
            totalCostUsd=total_cost,
            costComplete=cost_complete,
            turns=len(outcome.turns),
            toolCallCount=len(outcome.tool_calls),
            modelCallCount=sum(1 for r in records if r.kind == "model_call" and r.status == "in_flight"),
            actualModelIds=outcome.model_ids,
            finalMessageSha256=hashlib.sha256(final_answer.encode()).hexdigest(),
            durationMs=round(outcome.duration_s * 1000),
        )


async def _agent_outcome(
    resolved: ResolvedSpec, agent_dir: Path, ledger: EventLedger
) -> tuple[AgentOutcome | None, tuple[str, str, int] | None]:
    """The agent's outcome, and the failure (error code, error, exit code) it ended in, if any."""
    try:
        outcome = await run_agent(resolved, agent_dir, ledger)
    except LedgerWriteError as exc:
        return None, (EVIDENCE_PERSIST_FAILED, f"the ledger failed during the agent run: {exc}", EXIT_EVIDENCE_FAILED)
    except Exception as exc:  # noqa: BLE001 - a plugin's failure is this run's outcome, reported, not raised
        return None, (FRAMEWORK_FAILED, f"the agent run raised {type(exc).__name__}: {exc}", EXIT_FRAMEWORK_FAILED)
    if outcome.limit is not None:
        return outcome, (AGENT_LIMIT_EXCEEDED, outcome.limit.message, EXIT_FRAMEWORK_FAILED)
    if outcome.error is not None:
        return outcome, (MODEL_FAILED if outcome.model_failed else AGENT_FAILED, outcome.error, EXIT_FRAMEWORK_FAILED)
    return outcome, None


async def dispatch(
    spec_path: str | Path, *, run_id: str | None = None, runs_dir: str | Path | None = None
) -> tuple[dict[str, Any], int]:
    """Run one dispatch; every controlled failure is a receipt and an exit code, never an exception."""
    return await Dispatch(Path(spec_path)).run(run_id, Path(runs_dir) if runs_dir is not None else None)


def run_dispatch(
    spec_path: str | Path, *, run_id: str | None = None, runs_dir: str | Path | None = None
) -> tuple[dict[str, Any], int]:
    return asyncio.run(dispatch(spec_path, run_id=run_id, runs_dir=runs_dir))
