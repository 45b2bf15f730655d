"""The durable side of one agent attempt, shared by the agent harnesses (tool_agent, miniswe).

A ``DurableSession`` owns the attempt's activity log, its checkpoint store and its clock (time summed
over every process that worked on the attempt, R-RESUME-3). Harnesses run every model call and every
command through it, so each gets an in-flight record before it starts and a completed one after it
(R-LOG-1), each completed command a checkpoint of the environment's files (R-CKPT-1), and a resume
(``durable.resume``) can settle what a crash left in flight, whichever harness wrote the log.

A command's output is stored once and bounded: the record keeps at most ``max_observation_chars`` of it
(its head and tail, what the model is shown), and an output longer than that goes whole to
``blobs/<sha256>`` beside the log, redacted like the log, referenced by its digest.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.durable.activity import ACTIVITY_FILE, ActivityLog, ActivityRecord, Status
from agentcompass_dagster.runtime.store.atomic import atomic_write_bytes
from agentcompass_dagster.runtime.store.redact import redact_text

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.environment import EnvironmentSession
    from agentcompass_dagster.durable.checkpoints import CheckpointStore

CALLS_DIR = ".agentcompass/calls"
CURSOR_FILE = ".agentcompass/cursor"
BLOBS_DIR = "blobs"


def bounded(output: str, limit: int) -> str:
    """The head and tail of an output longer than ``limit`` characters, with a note of what was cut."""
    if len(output) <= limit:
        return output
    return output[: limit // 2] + f"\n[... {len(output) - limit} characters cut ...]\n" + output[-(limit // 2) :]


def observation(exit_code: int | None, output: str) -> str:
    """What the model is shown of a command: its exit code and its (bounded) output."""
    return f"exit code: {exit_code}\n{output}"


class DurableSession:
    def __init__(
        self,
        env: EnvironmentSession,
        durable_dir: Path,
        *,
        fingerprint: dict[str, Any],
        command_timeout_s: float,
        max_observation_chars: int,
        replay_safe_commands: list[str],
        resume_wait_s: float,
        checkpoints: bool,
        log_redacted: bool = True,
        on_record: Callable[[ActivityRecord], None] | None = None,
    ) -> None:
        self.env = env
        self.dir = durable_dir
        self.fingerprint = fingerprint
        self.command_timeout_s = command_timeout_s
        self.max_observation_chars = max_observation_chars
        self.resume_wait_s = resume_wait_s
        self.log = ActivityLog(durable_dir / ACTIVITY_FILE, redacted=log_redacted)
        self.listeners: list[Callable[[ActivityRecord], None]] = [on_record] if on_record is not None else []
        self.store: CheckpointStore | None = None
        if checkpoints and env.checkpoint_roots() is not None:
            from agentcompass_dagster.durable.checkpoints import CheckpointStore

            self.store = CheckpointStore(durable_dir / "checkpoints")
        self._safe = [re.compile(p) for p in replay_safe_commands]
        self.restart_clock(self.log.elapsed_s())

    # --- the log and the clock --------------------------------------------------------------------

    def restart_clock(self, elapsed_before: float) -> None:
        """Count time from now on top of what earlier processes spent on this attempt (R-RESUME-3)."""
        self._elapsed_before, self._started = elapsed_before, time.monotonic()

    def elapsed(self) -> float:
        return self._elapsed_before + time.monotonic() - self._started

    def append(self, record: ActivityRecord) -> ActivityRecord:
        record.elapsed_s = self.elapsed()
        self.log.append(record)
        for listener in self.listeners:
            listener(record)
        return record

    def reset(self) -> None:
        """Start the attempt over in an empty log (the old one was set aside by the caller)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = ActivityLog(self.dir / ACTIVITY_FILE, redacted=self.log.redacted)
        self.restart_clock(0.0)
        if self.store is not None:
            self.store = type(self.store)(self.dir / "checkpoints")

    def begin(self, resumed: str | None) -> None:
        self.append(
            ActivityRecord(
                id="session",
                kind="session",
                status="in_flight",
                data={"fingerprint": self.fingerprint, "handle": self.env.handle(), "resumed": resumed},
            )
        )

    def end(self, status: str, error: str | None, final_answer: str | None, limit: dict[str, Any] | None) -> None:
        self.append(
            ActivityRecord(
                id="session",
                kind="session",
                status="completed",
                data={"status": status, "error": error, "final_answer": final_answer, "limit": limit},
            )
        )

    def replay_safe(self, tool: str, command: str | None) -> bool:
        return tool == "submit" or (command is not None and any(p.search(command) for p in self._safe))

    # --- commands --------------------------------------------------------------------------------

    async def execute(self, key: str, command: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Run a bash command so that its output and exit code also land in the environment's commands
        directory. The command runs in a subshell that outlives this process where the environment does
        (local), so a resume in the same environment can wait for it (the session records its process,
        labelled with the call's key) and collect its result, or report the partial output of one that
        was killed (R-RESUME-1). The agent can write that directory: a resume only trusts what it reads
        there after checking it (a number for the exit code, never a symlink).

        The log is fsynced first (in a thread: the other attempts go on), so the command's in-flight
        record survives even a power cut: a resume that found no trace of a command could not know to
        collect its result, and might run it twice. The only fsync an agent's step waits for: lost to a
        power cut, any other record costs work done again (a model call without its completion is asked
        again), and a finished attempt is its detail file, fsynced."""
        await asyncio.to_thread(self.log.sync)
        timeout = self.command_timeout_s if timeout_s is None else min(timeout_s, self.command_timeout_s)
        base = f"{self.env.commands_dir}/{CALLS_DIR}/{key}"
        out, exit_file = (shlex.quote(base + suffix) for suffix in (".out", ".exit"))
        calls = shlex.quote(f"{self.env.commands_dir}/{CALLS_DIR}")
        # Builtins where they do (a test, read, an exit file written in place rather than renamed, the
        # command evaluated in a subshell of this shell rather than a new bash): every process the wrapper
        # starts costs a command ~1-2 ms. A resume reads an exit file only once it holds a number, or once
        # the process that writes it is gone.
        script = (
            f"[ -d {calls} ] || mkdir -p {calls}; "
            f"( ( eval {shlex.quote(command)} ) > {out} 2>&1 < /dev/null; echo $? > {exit_file} ) & wait $!; "
            f"cat {out}; read -r code < {exit_file}; exit $code"
        )
        result = await self.env.exec(script, timeout_s=timeout, label=key)
        output = result.stdout + result.stderr
        if result.timed_out:
            try:
                # Its ends only: the command (or any other) may have made that file gigabytes long.
                output = (await self.env.read_output(base + ".out")).text()
            except OSError:
                output = ""
            # The environment may have cut it sooner: the attempt's wall time left was shorter.
            output += f"\n[command timed out after {round(min(timeout, result.duration_s), 1):g}s]"
        return {
            "command": command,
            "exit_code": result.exit_code,
            **self.stored_output(output),
            "duration_s": result.duration_s,
            "timed_out": result.timed_out,
        }

    def stored_output(self, output: str) -> dict[str, Any]:
        """The record's fields for a command output: the bounded text, and for a longer one the blob
        that holds it whole."""
        if len(output) <= self.max_observation_chars:
            return {"output": output}
        data = (redact_text(output) if self.log.redacted else output).encode()
        digest = hashlib.sha256(data).hexdigest()
        blob = self.dir / BLOBS_DIR / digest
        if not blob.exists():
            blob.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(blob, data)
        return {
            "output": bounded(output, self.max_observation_chars),
            "output_blob": {"sha256": digest, "chars": len(output)},
        }

    async def complete_tool(self, key: str, data: dict[str, Any], status: Status = "completed") -> ActivityRecord:
        """R-LOG-1: the checkpoint is saved before the completed record that names it. A command that
        changed no file names the checkpoint the files are still at, and the environment's cursor stays."""
        seq = self.log.next_seq()
        previous = checkpoint_seq = self.log.last_checkpoint_seq()
        roots = self.env.checkpoint_roots()
        if self.store is not None and roots is not None and data.get("command") is not None:
            checkpoint_seq = (await asyncio.to_thread(self.store.capture, seq, roots)).seq
        record = self.append(
            ActivityRecord(id=key, kind="tool_call", status=status, seq=seq, checkpoint_seq=checkpoint_seq, data=data)
        )
        if checkpoint_seq != previous:
            await self.env.write_file(f"{self.env.scratch}/{CURSOR_FILE}", str(checkpoint_seq).encode())
        return record
