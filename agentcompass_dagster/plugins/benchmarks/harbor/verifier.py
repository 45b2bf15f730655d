"""How a Harbor task's tests/test.sh runs: under the framework's judge (judge.py ``harbor`` mode) where the
environment has a python3, else as a plain program.

Harbor's tests run the agent's code in their own processes (pytest imports it) as the verifier's user,
so that code could end the verifier or outlive it to rewrite the reward it wrote. Under the judge the
verifier runs confined, and a verifier killed by a signal, or one that left processes behind, gives no
verdict; the judge kills what it left before it answers, so the rewards are read once every verifier
process is gone. What stays possible, as under Harbor: the agent's code, inside the tests' own process,
can write /logs/verifier/reward.* itself or change what the tests conclude; the verdict of such a format
is as strong as its tests' isolation of the code they import.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel

from agentcompass_dagster.plugins.benchmarks import judge
from agentcompass_dagster.plugins.benchmarks.judging import run_judge
from agentcompass_dagster.contracts.environment import Caller, EnvironmentSession

PROBE_TIMEOUT_S = 60.0


class TestRun(BaseModel):
    """How a verifier run ended, before its rewards are read."""

    timed_out: bool = False
    # Why the run gives no verdict whatever the rewards say (killed, left processes), or None.
    problem: str | None = None
    exit_code: int | None = None
    # Whether it ran under the judge, in a Landlock domain of its own.
    confined: bool = False


async def run_tests(
    session: EnvironmentSession, task_id: str, script: str, output: str, timeout_s: float, env: dict[str, str]
) -> TestRun:
    """Run ``script`` as a program from the working directory, as the verifier, its output into ``output``."""
    probe = await session.exec("command -v python3", caller=Caller.verifier, timeout_s=PROBE_TIMEOUT_S)
    if probe.exit_code != 0:
        outcome = await session.exec(
            f"({shlex.quote(script)}) > {shlex.quote(output)} 2>&1",
            timeout_s=timeout_s,
            caller=Caller.verifier,
            env=env,
        )
        return TestRun(timed_out=outcome.timed_out, exit_code=outcome.exit_code)
    # Through bash, which runs a script without a #! line as a shell script, as `(script)` did.
    verdict = await run_judge(
        session, task_id, "harbor", [output, "bash", "-c", shlex.quote(script)], timeout_s, env=env
    )
    if verdict.timed_out:
        return TestRun(timed_out=True, confined=verdict.confined)
    exit_codes = [
        line.removeprefix(judge.EXIT_CODE).strip()
        for line in verdict.output.splitlines()
        if line.startswith(judge.EXIT_CODE)
    ]
    exit_code = int(exit_codes[-1]) if exit_codes and exit_codes[-1].lstrip("-").isdigit() else None
    problem = None if verdict.passed else verdict.reason.removeprefix("failed: ")
    return TestRun(problem=problem, exit_code=exit_code, confined=verdict.confined)
