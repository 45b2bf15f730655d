"""One attempt of an agent CLI: install it when its environment image has no installation yet, then run
it on the task's instruction with its SDK pointed at the model gateway under a token of this attempt."""

from __future__ import annotations

import asyncio
import secrets
import shlex
from typing import TYPE_CHECKING, Any

from agentcompass_dagster.contracts.environment import ExecResult
from agentcompass_dagster.contracts.records import RunResult, Usage
from agentcompass_dagster.durable.activity import ACTIVITY_FILE, ActivityRecord
from agentcompass_dagster.durable.session import DurableSession
from agentcompass_dagster.gateway.forwarding import forwarded
from agentcompass_dagster.plugins.harnesses.cli_agent.logs import LOGS_TAR, pack_command, unpack
from agentcompass_dagster.plugins.harnesses.cli_agent.trajectory import cli_trajectory, current_run
from agentcompass_dagster.plugins.harnesses.cli_agent.turns import AttemptTurns, Recorded, recorded_turns
from agentcompass_dagster.plugins.harnesses.durable_agent import DurableAgentSession
from agentcompass_dagster.plugins.models.usage import usage_totals
from agentcompass_dagster.runtime.store.attempt_files import save_files
from agentcompass_dagster.runtime.store.run_files import set_aside

if TYPE_CHECKING:
    from agentcompass_dagster.plugins.harnesses.cli_agent.harness import CliAgentHarness

INSTRUCTION_FILE = ".agentcompass/instruction.md"
ANSWER_CHARS = 4000


class InstallFailed(RuntimeError):
    """The declaration's install commands failed: the setup's error, not the agent's."""


class ForwarderFailed(RuntimeError):
    """The environment cannot run the gateway's forwarder: the setup's error, not the agent's."""


class CliAgentSession(DurableAgentSession):
    harness: CliAgentHarness
    _durable: DurableSession | None = None
    _turns: AttemptTurns

    async def install(self) -> None:
        """Run the install commands into a staging installation (the baseline phase), and keep it."""
        staging = self.harness.staging(self.plan)
        if staging is None:
            return
        script = " && ".join(f"( {command} )" for command in self.harness.params.install)
        result = await self.env.exec(
            f"set -o pipefail; {self.harness.prelude()} {script}",
            timeout_s=self.harness.params.install_timeout_s,
            label="install",
            env=self.harness.registry_env(),
        )
        if result.exit_code != 0:
            raise InstallFailed(
                f"harness {self.harness.id!r}: install failed (exit code {result.exit_code}"
                f"{', timed out' if result.timed_out else ''}): {result.output[-2000:]}"
            )
        await asyncio.to_thread(self.harness.cache.publish, staging, self.harness.cache_key(staging))

    async def check_forwarder(self) -> None:
        """The forwarder starts in this environment (it has python3 or node): checked by the framework
        before the agent runs, so that whatever fails once the agent runs is the agent's."""
        result = await self.env.exec(forwarded("true"), timeout_s=60, label="forwarder")
        if result.exit_code != 0:
            raise ForwarderFailed(f"harness {self.harness.id!r}: {result.stderr.strip() or result.stdout.strip()}")

    async def run(self) -> RunResult:
        durable = DurableSession(
            self.env,
            self.durable_dir(),
            fingerprint=self.fingerprint(),
            command_timeout_s=0,
            max_observation_chars=20_000,
            replay_safe_commands=[],
            resume_wait_s=0,
            checkpoints=False,
        )
        turns = AttemptTurns(
            durable, self.model, self.prepared.task.id, self.plan.attempt, self.plan.budget, self._earlier(durable)
        )
        self._durable, self._turns = durable, turns
        durable.begin("replay" if turns.replay is not None else None)
        token = self.harness.gateway.admit(turns)
        try:
            executed = await self._execute(token)
        finally:
            self.harness.gateway.forget(token)
        return self._result(executed, await self._logs())

    def _earlier(self, durable: DurableSession) -> list[Recorded]:
        """The turns of an earlier run of this attempt to replay: one that a crash cut short, or that ended
        without an error; an earlier run that ended in an error is set aside and the attempt starts over."""
        records = durable.log.records()
        ended = [r for r in records if r.kind == "session" and r.status == "completed"]
        if ended and ended[-1].data.get("error"):
            set_aside(durable.dir / ACTIVITY_FILE)
            durable.reset()
            return []
        for record in durable.log.in_flight():
            durable.append(
                ActivityRecord(
                    id=record.id,
                    kind=record.kind,
                    status="aborted",
                    data={**record.data, "error": "the process running the attempt stopped"},
                )
            )
        return recorded_turns(current_run(records))

    async def _execute(self, token: str) -> ExecResult:
        params = self.harness.params
        port = 20000 + secrets.randbelow(40000)
        variables = {
            **params.agent_env(f"http://127.0.0.1:{port}", token, self.harness.model_name()),
            "AGENTCOMPASS_INSTRUCTION": self.prepared.input,
            "AGENTCOMPASS_INSTRUCTION_FILE": f"{self.env.commands_dir}/{INSTRUCTION_FILE}",
        }
        await self.env.write_file(variables["AGENTCOMPASS_INSTRUCTION_FILE"], self.prepared.input.encode())
        pack = pack_command(params.logs, f"{self.env.commands_dir}/{LOGS_TAR}") if params.logs else "true"
        agent = f"{self.harness.prelude()} {params.run}"
        command = forwarded(f"bash -c {shlex.quote(agent)}; code=$?; {pack}; exit $code", port=port)
        return await self.env.exec(command, env=variables, label="agent")

    async def _logs(self) -> list[str]:
        """The agent's logs, kept as the attempt's files; their names."""
        if not self.harness.params.logs or self.plan.artifacts_dir is None:
            return []
        try:
            packed = await self.env.read_file(f"{self.env.commands_dir}/{LOGS_TAR}")
        except OSError:
            return []
        return await asyncio.to_thread(save_files, self.plan.artifacts_dir, unpack(packed))

    def _usage(self) -> Usage:
        """What the attempt's model calls spent, in every process that ran it (a replayed turn: nothing)."""
        assert self._durable is not None
        return usage_totals(
            Usage.model_validate(r.data["usage"])
            for r in self._durable.log.records()
            if r.kind == "model_call" and r.status == "completed"
        )[0]

    def _result(self, executed: ExecResult, logs: list[str]) -> RunResult:
        turns = self._turns
        assert self._durable is not None
        total = self._usage()
        error = turns.model_error
        result = RunResult(
            status="error" if error else "completed",
            final_answer=executed.stdout[-ANSWER_CHARS:].strip(),
            trajectory=self._trajectory(executed),
            usage=total,
            error=error,
            duration_s=executed.duration_s,
            artifacts={
                "exit_code": executed.exit_code,
                "timed_out": executed.timed_out,
                "agent_logs": logs,
                **turns.summary(),
            },
        )
        if turns.replay is not None:
            self._durable.append(
                ActivityRecord(id="replay", kind="phase", status="completed", data=turns.replay.model_dump())
            )
        self._durable.end(result.status, error, result.final_answer, None)
        return result

    def _trajectory(self, executed: ExecResult | None) -> list[dict[str, Any]]:
        assert self._durable is not None
        steps = cli_trajectory(self._durable.log.records(), self.prepared.input)
        if executed is not None:
            steps.append(
                {
                    "type": "command",
                    "command": self.harness.params.run,
                    "exit_code": executed.exit_code,
                    "output": (executed.stdout + executed.stderr)[-20_000:],
                    "timed_out": executed.timed_out,
                    "duration_s": executed.duration_s,
                }
            )
        return steps

    def stopped(self, error: str) -> RunResult | None:
        if self._durable is None:
            return None
        return RunResult(
            status="failed",
            trajectory=self._trajectory(None),
            usage=self._usage(),
            error=error,
            artifacts=self._turns.summary(),
        )
