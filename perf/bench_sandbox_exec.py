"""The sandbox's cost per command: median wall time of exec("true") in an open sandbox session, with the
seccomp filter (as shipped) and without it, N calls each, alternating rounds. Run by hand on a quiet
machine: python perf/bench_sandbox_exec.py [--n 200]"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment, SandboxSession
from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec


class Unfiltered(SandboxSession):
    """The same session with the filter left out of bwrap's arguments."""

    def bwrap(self, command: str, cwd: str, caller, fds: list[int]) -> list[str]:  # type: ignore[no-untyped-def]
        args = super().bwrap(command, cwd, caller, fds)
        at = args.index("--seccomp")
        return args[:at] + args[at + 2 :]


async def timings(session: SandboxSession, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        result = await session.exec("true")
        out.append(time.perf_counter() - started)
        assert result.exit_code == 0, result
    return out


async def main(n: int) -> None:
    os.environ.setdefault("AGENTCOMPASS_SANDBOX_ROOT", tempfile.mkdtemp(prefix="bench-sandbox-", dir="/var/tmp"))
    environment = SandboxEnvironment(EnvironmentConfig(id="sandbox", provider="sandbox"))
    plan = ExecutionPlan(
        task_id="t", attempt=1, benchmark_id="b", harness_id="h", environment_id="sandbox", model_id="m"
    )
    session = await environment.open(plan, TaskSpec(id="t", input="x"))
    assert isinstance(session, SandboxSession)
    results: dict[str, list[float]] = {"with seccomp": [], "without": []}
    try:
        for _ in range(3):
            session.__class__ = SandboxSession
            results["with seccomp"] += await timings(session, n)
            session.__class__ = Unfiltered
            results["without"] += await timings(session, n)
    finally:
        session.__class__ = SandboxSession
        await session.close()
    for name, values in results.items():
        print(f"exec('true') {name}: median {statistics.median(values) * 1000:.2f} ms over {len(values)} calls")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    asyncio.run(main(parser.parse_args().n))
