"""How a benchmark runs the framework's judge (judge.py) in a task's environment and reads its verdict.

The judge and a one-time token are written to the environment's private scratch for each check; a check
passes only when the judge's last line carries that token and says passed. Exit codes decide nothing: the
tested code could produce any of them.
"""

from __future__ import annotations

import json
import secrets
import shlex
from functools import cache
from pathlib import Path

from pydantic import BaseModel

from agentcompass_dagster.plugins.benchmarks import judge as judge_module
from agentcompass_dagster.contracts.environment import Caller, EnvironmentSession
from agentcompass_dagster.runtime.store.naming import file_stem


class Verdict(BaseModel):
    passed: bool
    # "passed", or why not: the judge's reason, "timed out", or that it gave no verdict.
    reason: str
    # What the judge printed before its verdict (a check's own output, at most its last 4,000 characters).
    output: str
    # Whether the tested code ran in a Landlock domain of its own (judge.py): False on a kernel without.
    confined: bool = False
    timed_out: bool = False


@cache
def judge_source() -> bytes:
    return Path(judge_module.__file__).read_bytes()


async def run_judge(
    session: EnvironmentSession,
    task_id: str,
    mode: str,
    arguments: list[str],
    timeout_s: float,
    payload: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> Verdict:
    """Run ``judge.py MODE TOKEN ARGUMENTS...`` (after the payload's file when there is one) as the
    verifier, with ``env`` added, within ``timeout_s``."""
    stem = f"{session.scratch}/judge-{file_stem(task_id)}-{secrets.token_hex(4)}"
    token = secrets.token_hex(16)
    judge = f"{session.scratch}/judge.py"
    await session.write_file(judge, judge_source())
    await session.write_file(f"{stem}.token", token.encode())
    if payload is not None:
        await session.write_file(f"{stem}.json", json.dumps(payload).encode())
        arguments = [f"{stem}.json", *arguments]
    command = shlex.join(["python3", "-I", judge, mode, f"{stem}.token", *arguments])
    outcome = await session.exec(f"exec {command}", timeout_s=timeout_s, caller=Caller.verifier, env=env)
    before, _, last = outcome.stdout.rstrip().rpartition("\n")
    prefix = f"{judge_module.VERDICT} {token} "
    if outcome.timed_out:
        return Verdict(passed=False, reason="timed out", output=before, timed_out=True)
    if not last.startswith(prefix):
        told = outcome.output.strip()[-500:]
        return Verdict(
            passed=False,
            output=outcome.output,
            reason=f"the judge gave no verdict (exit code {outcome.exit_code})" + (f": {told}" if told else ""),
        )
    confinement, _, verdict = last[len(prefix) :].partition(" ")
    return Verdict(passed=verdict == "passed", reason=verdict, output=before, confined=confinement == "confined")
