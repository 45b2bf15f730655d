"""Resume an unfinished attempt from its activity log (R-RESUME-1, R-RESUME-2), for any harness that
runs through a ``DurableSession``.

The harness calls ``prepare_resume`` when it finds a log. One written under another configuration is set
aside and the attempt starts over. One whose agent had finished:

- without an error (the process died after the agent ended, while scoring): its recorded outcome stands
  and nothing is run again;
- with an error (a model endpoint that failed, a command the environment could not run): it is set aside
  and the attempt starts over from the beginning, like a new sample. Not from its last checkpoint: the
  conversation up to the error is conditioned on whatever caused it (a truncated reply, an outage
  mid-turn), and a re-run is asked for to get an attempt the error did not shape.

Otherwise the attempt was interrupted, and the old environment is classified:

- busy: a command of the old environment still runs; wait for it up to ``resume_wait_s``, and if it
  still runs, stop and leave the attempt unfinished rather than run a second copy beside it;
- attached: the old environment is still there (same identity token) and either the in-flight command
  finished after the parent died (its exit code and output are collected and recorded, with a
  checkpoint) or its files are at the log's last checkpoint; its files are adopted;
- rebuilt: otherwise the fresh environment (set up again by the benchmark) gets the latest checkpoint.

Then every step still in flight is settled: a model call is marked aborted and will be sent again; a
tool call is re-run only when it is replay-safe, otherwise the model is told it was interrupted, with
whatever output it had produced.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcompass_dagster.durable.activity import ActivityRecord
from agentcompass_dagster.durable.session import CALLS_DIR, CURSOR_FILE, DurableSession, observation
from agentcompass_dagster.plugins.environments.hostdir import probe_hostdir, process_of
from agentcompass_dagster.contracts.capture import OUTPUT_LIMIT
from agentcompass_dagster.runtime.store.safe_fs import read_beneath
from agentcompass_dagster.runtime.store.run_files import set_aside

INTERRUPTED_NOTE = (
    "[interrupted: the command was running when the agent process stopped; it was not run "
    "again because it is not declared replay-safe. Output it had produced:]\n"
)


class CannotRestore(Exception):
    """Commands ran, but no checkpoint holds their files (checkpoints off, or an environment whose files
    this machine cannot reach, such as docker's)."""


@dataclass
class ResumeDecision:
    classification: str
    reason: str | None = None


async def prepare_resume(run: DurableSession) -> ResumeDecision:
    records = run.log.records()
    sessions = [r for r in records if r.kind == "session"]
    # A fork's seed names its lineage instead of a fingerprint: its configuration was checked when it was made.
    seeded = bool(sessions) and sessions[0].data.get("seed") is True
    first = sessions[0].data.get("fingerprint") if sessions else None
    if not seeded and first != run.fingerprint:
        archive(run)
        return ResumeDecision("fresh")
    done = bool(sessions) and sessions[-1].status == "completed"
    if done and sessions[-1].data.get("error"):
        archive(run)
        return ResumeDecision("errored", reason=sessions[-1].data["error"])
    handle = next((s.data.get("handle") for s in reversed(sessions) if s.status == "in_flight"), None)
    in_flight = [] if done else run.log.in_flight()
    try:
        decision, finished, partial = await classify_environment(run, handle, in_flight)
    except CannotRestore:
        # Continuing, or scoring, without the files the commands produced would mislead: start over.
        archive(run)
        return ResumeDecision("fresh")
    if done:
        # The agent had finished when the process died (while scoring, say): its outcome stands, and
        # the environment now holds its files again for the evaluation.
        return ResumeDecision("finished")
    if decision.classification == "busy":
        return decision
    await settle_in_flight(run, in_flight, finished, partial)
    return decision


async def settle_in_flight(
    run: DurableSession,
    in_flight: list[ActivityRecord],
    finished: dict[str, tuple[int, str]],
    partial: dict[str, str],
) -> None:
    """Settle every step the crash left in flight: a model call is aborted, to be sent again; a tool call
    is completed with its exit code and output when it finished after the crash (``finished``), aborted to
    run again when replay-safe, else completed as interrupted with the output it had produced (``partial``)."""
    for record in in_flight:
        if record.kind == "model_call":
            run.append(
                ActivityRecord(
                    id=record.id,
                    kind="model_call",
                    status="aborted",
                    data={**record.data, "reason": "interrupted by a crash; sent again"},
                )
            )
            continue
        call = record.data["call"]
        if record.id in finished:
            exit_code, output = finished[record.id]
            await run.complete_tool(
                record.id,
                {
                    "turn": record.data["turn"],
                    "call": call,
                    "command": record.data.get("command"),
                    "exit_code": exit_code,
                    **run.stored_output(output),
                    "recovered": True,
                },
            )
        elif run.replay_safe(call["name"], record.data.get("command")):
            run.append(
                ActivityRecord(
                    id=record.id,
                    kind="tool_call",
                    status="aborted",
                    data={**record.data, "reason": "interrupted; replay-safe, so run again"},
                )
            )
        else:
            stored = run.stored_output(partial.get(record.id, ""))
            await run.complete_tool(
                record.id,
                {
                    "turn": record.data["turn"],
                    "call": call,
                    "command": record.data.get("command"),
                    "exit_code": None,
                    **stored,
                    "interrupted": True,
                    "observation": observation(None, INTERRUPTED_NOTE + stored["output"]),
                },
                status="interrupted",
            )


async def classify_environment(
    run: DurableSession, handle: dict[str, Any] | None, in_flight: list[ActivityRecord]
) -> tuple[ResumeDecision, dict[str, tuple[int, str]], dict[str, str]]:
    """Busy, attached or rebuilt; with the commands that finished after the crash and partial outputs."""
    tools = [r for r in in_flight if r.kind == "tool_call"]
    finished: dict[str, tuple[int, str]] = {}
    partial: dict[str, str] = {}
    if handle is not None and handle.get("kind") == "hostdir" and probe_hostdir(handle):
        root = Path(handle["root"])
        calls = f"commands/{CALLS_DIR}"
        deadline = time.monotonic() + run.resume_wait_s
        for record in tools:
            while _running(root, calls, record.id):
                if time.monotonic() >= deadline:
                    return (
                        ResumeDecision(
                            "busy",
                            reason=(
                                f"cannot resume: command {record.id} still runs in the old environment after "
                                f"{run.resume_wait_s}s; the attempt stays unfinished"
                            ),
                        ),
                        {},
                        {},
                    )
                await asyncio.sleep(0.1)
            exit_code = _exit_code(root, calls, record.id)
            output = _read(root, f"{calls}/{record.id}.out") or ""
            if exit_code is not None:
                finished[record.id] = (exit_code, output)
            else:
                partial[record.id] = output
        cursor = _read(root, f"scratch/{CURSOR_FILE}")
        last = run.log.last_checkpoint_seq()
        at_checkpoint = (cursor.strip() if cursor else None) == (str(last) if last is not None else None)
        if (finished or at_checkpoint) and await run.env.adopt(handle):
            return ResumeDecision("attached"), finished, partial
        await run.env.discard(handle)
    await rebuild(run)
    return ResumeDecision("rebuilt"), {}, partial


async def rebuild(run: DurableSession) -> None:
    """Restore the latest checkpoint into the fresh environment the benchmark has just set up."""
    seq = run.log.last_checkpoint_seq()
    roots = run.env.checkpoint_roots()
    if seq is None or run.store is None or roots is None:
        changed_files = any(
            r.kind == "tool_call" and r.status == "completed" and r.data.get("command") for r in run.log.records()
        )
        if changed_files:
            raise CannotRestore
        return
    await asyncio.to_thread(run.store.restore, seq, roots, run.env.file_owner())


def archive(run: DurableSession) -> None:
    """Move a log that is not to be continued (and its checkpoints and blobs) aside; nothing is deleted."""
    set_aside(run.dir)
    run.reset()


def _running(root: Path, calls: str, key: str) -> bool:
    """Whether the command of call ``key`` still runs: not once it wrote its exit code; otherwise as the
    host recorded its process (a pid the agent wrote could name any process of this machine)."""
    return _exit_code(root, calls, key) is None and bool(process_of(root, key))


def _exit_code(root: Path, calls: str, key: str) -> int | None:
    """The exit code call ``key``'s wrapper wrote, if it holds a number: the file is written in place,
    so a wrapper seen mid-write (or killed there) left it empty."""
    text = _read(root, f"{calls}/{key}.exit")
    return int(text) if text is not None and text.strip().lstrip("-").isdigit() else None


def _read(root: Path, path: str) -> str | None:
    """A file the old environment left, read beneath its root without following symlinks."""
    try:
        return read_beneath(root, path, OUTPUT_LIMIT).decode(errors="replace")
    except OSError:
        return None
