"""The `oracle` harness: runs the benchmark's reference solution. It must score 100%; anything less
means the benchmark, the environment or the evaluation is broken."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from agentcompass_dagster.contracts.environment import Caller, EnvironmentSession
from agentcompass_dagster.contracts.harness import Harness, HarnessSession
from agentcompass_dagster.runtime.store.naming import file_stem
from agentcompass_dagster.contracts.records import PreparedTask, RunResult

if TYPE_CHECKING:
    from agentcompass_dagster.contracts.benchmark import Benchmark

SOLUTION_TIMEOUT_S = 600.0
# Reference scripts find the task's private files (e.g. a solution's data) under this variable.
SCRATCH_VARIABLE = "AGENTCOMPASS_SCRATCH"


async def run_reference(prepared: PreparedTask, env: EnvironmentSession, benchmark: Benchmark) -> RunResult:
    """The reference solution's script in the working directory, and its final answer."""
    solution = benchmark.reference_solution(prepared.task)
    if solution is None:
        return RunResult(status="error", error=f"benchmark {benchmark.id!r} has no reference solution")
    trajectory = []
    if solution.script is not None or solution.path is not None:
        if solution.path is not None:
            if solution.upload_from is not None and solution.upload_to is not None:
                await env.upload_dir(solution.upload_from, solution.upload_to)
            # A program of the task's own (Harbor's /solution/solve.sh), run as it is, with its shebang.
            command = f"chmod +x {shlex.quote(solution.path)} && {shlex.quote(solution.path)}"
        else:
            path = f"{env.scratch}/solution-{file_stem(prepared.task.id)}.sh"
            await env.write_file(path, (solution.script or "").encode(), 0o755)
            command = f"bash {shlex.quote(path)}"
        # The reference sees the framework's private files (a solution's data); no agent ever does.
        outcome = await env.exec(
            command,
            timeout_s=SOLUTION_TIMEOUT_S,
            caller=Caller.reference,
            env={SCRATCH_VARIABLE: env.scratch, **solution.env},
        )
        trajectory.append(
            {"type": "command", "command": command, "exit_code": outcome.exit_code, "output": outcome.output[-4000:]}
        )
        if outcome.exit_code != 0:
            return RunResult(
                status="error",
                trajectory=trajectory,
                duration_s=outcome.duration_s,
                error=f"reference solution exited with {outcome.exit_code}: {outcome.output[-500:]}",
            )
    return RunResult(final_answer=solution.answer, trajectory=trajectory)


class OracleSession(HarnessSession):
    async def run(self) -> RunResult:
        return await run_reference(self.prepared, self.env, self.benchmark)


class OracleHarness(Harness):
    session_class = OracleSession
