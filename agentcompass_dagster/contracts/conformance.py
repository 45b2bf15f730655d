"""The environment conformance kit: what the framework promises of every environment provider, checked
against a provider by running real commands in sessions it opens.

A provider author runs it from a test of their own::

    from agentcompass_dagster.contracts.conformance import assert_conformant

    def test_my_provider_keeps_the_frameworks_promises():
        assert_conformant(MyEnvironment(EnvironmentConfig(id="mine", provider="mine")))

or ``agentcompass_dagster.contracts.conformance.check(environment)`` for the report of every check,
each passed, failed (with what was seen) or not applicable (with why). A provider that does not keep a
promise says so in ``Environment.gives_up`` (the check's name and why): the check still runs and its
failure is reported as given up, not as a failure (it may pass where the machine keeps the promise for
the provider: ``local`` run by a user who cannot write the system's directories).

The checks, by name:

- ``paths``: ``write_file`` of a relative path lands in the working directory (its missing directories
  made, its ``mode`` given) where the agent's commands read it, and ``read_file`` reads it back; an
  absolute path in ``scratch`` is read by the verifier's commands.
- ``exit_and_streams``: a command's exit code, stdout and stderr come back apart.
- ``output_bounds``: a command that writes 5 MB comes back with at most ``OUTPUT_LIMIT`` bytes of it
  held and every byte counted.
- ``timeout``: past ``timeout_s`` the command is killed and the result says ``timed_out``.
- ``timeout_kills_group``: the processes the timed-out command started go with it.
- ``cancellation_kills_group``: an ``exec`` cancelled while its command runs (the framework's wall limit
  does that) leaves none of the command's processes running.
- ``verifier_context``: the verifier's command gets a HOME and TMPDIR of its own, in which nothing the
  agent wrote into its own is found, ``VERIFIER_PYTHON_ENV``, and a PATH (``VERIFIER_PATH`` or the
  image's) with no directory the agent's commands can write.
- ``verifier_uid``: the verifier's commands run under a uid other than the agent's (the code under test
  never shares a uid with the code that decides the verdict).
- ``scratch_hidden``: the agent's commands do not see ``scratch``.
- ``network_none``: under the network policy ``none`` an agent's command cannot reach a TCP server on
  the host's 127.0.0.1 (not applicable to a provider without that policy).
"""

from __future__ import annotations

import asyncio
import secrets
import shlex
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, closing
from enum import StrEnum

from pydantic import BaseModel

from agentcompass_dagster.contracts.capture import OUTPUT_LIMIT
from agentcompass_dagster.contracts.environment import (
    VERIFIER_PYTHON_ENV,
    Caller,
    Environment,
    EnvironmentSession,
)
from agentcompass_dagster.contracts.records import ExecutionPlan, NetworkPolicy, TaskSpec

# Bounds of the kit's own waits: a provider past them fails the check that waited.
COMMAND_TIMEOUT_S = 60.0
GONE_WITHIN_S = 5.0
BIG_OUTPUT = 5_000_000


class Outcome(StrEnum):
    passed = "passed"
    failed = "failed"
    given_up = "given up"
    not_applicable = "not applicable"


class CheckResult(BaseModel):
    name: str
    outcome: Outcome
    detail: str = ""


class Failed(Exception):
    """A check saw the provider break its promise; the message says what was seen."""


class NotApplicable(Exception):
    """A check the provider has nothing to be checked for (a network policy it does not offer)."""


def plan_for(environment: Environment, network: NetworkPolicy = NetworkPolicy.host) -> ExecutionPlan:
    """An attempt's plan that asks nothing of ``environment`` but the network policy ``network``."""
    return ExecutionPlan(
        task_id="conformance",
        attempt=1,
        benchmark_id="conformance",
        harness_id="conformance",
        environment_id=environment.config.id,
        model_id="none",
        baseline_network_policy=network,
        run_network_policy=network,
        evaluation_network_policy=network,
    )


@asynccontextmanager
async def opened(
    environment: Environment, network: NetworkPolicy = NetworkPolicy.host
) -> AsyncIterator[EnvironmentSession]:
    plan = plan_for(environment, network)
    environment.validate_plan(plan)
    session = await environment.open(plan, TaskSpec(id="conformance"))
    try:
        await session.set_network_policy(network)
        yield session
    finally:
        await session.close()


async def _run(
    session: EnvironmentSession, command: str, caller: Caller = Caller.agent, timeout_s: float = COMMAND_TIMEOUT_S
) -> str:
    """``command``'s stdout; Failed naming the command when it does not exit 0."""
    result = await session.exec(command, caller=caller, timeout_s=timeout_s)
    if result.exit_code != 0:
        raise Failed(f"{command!r} for the {caller.value} exited {result.exit_code}: {result.output.strip()[-300:]}")
    return result.stdout


async def _paths(session: EnvironmentSession) -> None:
    await session.write_file("made/below/file.txt", b"written\n", 0o640)
    if await session.read_file("made/below/file.txt") != b"written\n":
        raise Failed("read_file of a relative path did not return what write_file wrote")
    seen = await _run(session, "cat made/below/file.txt && stat -c %a made/below/file.txt")
    if seen != "written\n640\n":
        raise Failed(f"the agent's command found {seen!r} in the working directory, not the file with mode 640")
    await session.write_file(f"{session.scratch}/check.txt", b"private\n")
    seen = await _run(session, f"cat {session.scratch}/check.txt", Caller.verifier)
    if seen != "private\n":
        raise Failed(f"the verifier read {seen!r} from scratch, not the file written there")


async def _exit_and_streams(session: EnvironmentSession) -> None:
    result = await session.exec("echo out; echo err >&2; exit 3", timeout_s=COMMAND_TIMEOUT_S)
    seen = (result.exit_code, result.stdout, result.stderr)
    if seen != (3, "out\n", "err\n"):
        raise Failed(f"exit code, stdout, stderr were {seen}, not (3, 'out\\n', 'err\\n')")


async def _output_bounds(session: EnvironmentSession) -> None:
    result = await session.exec(f"head -c {BIG_OUTPUT} /dev/zero | tr '\\0' x", timeout_s=COMMAND_TIMEOUT_S)
    if len(result.stdout.encode()) > OUTPUT_LIMIT + 200:
        raise Failed(f"the result held {len(result.stdout.encode())} bytes of stdout, over OUTPUT_LIMIT {OUTPUT_LIMIT}")
    if result.stdout_bytes != BIG_OUTPUT:
        raise Failed(f"stdout_bytes counted {result.stdout_bytes} of the {BIG_OUTPUT} bytes written")


def _survivor(token: str) -> str:
    """A command line that starts a background process named by ``token`` in the command's own process
    group, says so, and waits on it: what an agent's background job looks like."""
    return f"(exec -a {token} sleep 300) & echo started; wait"


async def _gone(session: EnvironmentSession, token: str) -> None:
    """Failed unless no process named ``token`` is seen by the session's commands within GONE_WITHIN_S (then
    killed, so the kit leaves nothing running). The pattern's bracket keeps the scan from finding its own
    command line."""
    pattern = f"'[{token[0]}]{token[1:]}'"
    scan = (
        f"for ((i = 0; i < {int(GONE_WITHIN_S * 10)}; i++)); do "
        f"grep -qsa -- {pattern} /proc/[0-9]*/cmdline || exit 0; sleep 0.1; done; exit 1"
    )
    result = await session.exec(scan, timeout_s=COMMAND_TIMEOUT_S)
    if result.exit_code != 0:
        await session.exec(
            f"for p in /proc/[0-9]*; do grep -qsa -- {pattern} $p/cmdline && kill -KILL ${{p#/proc/}}; done; true",
            timeout_s=COMMAND_TIMEOUT_S,
        )
        raise Failed(f"a process the command started in the background was still running {GONE_WITHIN_S:g}s later")


async def _timeout(session: EnvironmentSession) -> None:
    started = time.monotonic()
    result = await session.exec("sleep 1000", timeout_s=1.0)
    took = time.monotonic() - started
    if not result.timed_out or took > COMMAND_TIMEOUT_S:
        raise Failed(f"a 1 s timeout gave timed_out={result.timed_out} after {took:.1f}s")


async def _timeout_kills_group(session: EnvironmentSession) -> None:
    token = f"conformance-{secrets.token_hex(6)}"
    result = await session.exec(_survivor(token), timeout_s=2.0)
    if not result.timed_out:
        raise Failed(f"the command was not timed out: {result}")
    await _gone(session, token)


async def _cancellation_kills_group(session: EnvironmentSession) -> None:
    token = f"conformance-{secrets.token_hex(6)}"
    marker = f"started-{token}"
    running = asyncio.ensure_future(session.exec(f"touch {marker}; {_survivor(token)}", timeout_s=COMMAND_TIMEOUT_S))
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    while not (await session.exec(f"test -e {marker}", timeout_s=COMMAND_TIMEOUT_S)).exit_code == 0:
        if running.done() or time.monotonic() > deadline:
            raise Failed(f"the command to cancel never started: {running.result() if running.done() else 'no marker'}")
    running.cancel()
    try:
        await running
    except asyncio.CancelledError:
        pass
    await _gone(session, token)


async def _verifier_context(session: EnvironmentSession) -> None:
    show = 'printf "%s\\n" "$HOME" "$TMPDIR" "$PATH" "$PYTHONNOUSERSITE" "$PYTHONSAFEPATH" "$PYTHONDONTWRITEBYTECODE"'
    plant = f"planted-{secrets.token_hex(6)}"
    planted_paths = f'"$HOME/{plant}" "${{TMPDIR:-/tmp}}/{plant}"'
    await _run(session, f"touch {planted_paths}")
    try:
        await _verifier_sees(session, show, plant)
    finally:
        # A provider whose agent has this machine's HOME and /tmp (local, the example) keeps them clean.
        await session.exec(f"rm -f {planted_paths}", timeout_s=COMMAND_TIMEOUT_S)


async def _verifier_sees(session: EnvironmentSession, show: str, plant: str) -> None:
    agent = (await _run(session, show)).split("\n")
    verifier = (await _run(session, show, Caller.verifier)).split("\n")
    wanted = [VERIFIER_PYTHON_ENV[name] for name in ("PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE")]
    if verifier[3:6] != wanted:
        raise Failed(f"the verifier's Python settings were {verifier[3:6]}, not {wanted}")
    writable = await _run(
        session,
        " ".join(
            [
                "for d in",
                *(shlex.quote(d) for d in verifier[2].split(":") if d),
                '; do test -w "$d" && echo "$d"; done; true',
            ]
        ),
    )
    if writable:
        raise Failed(f"the agent can write {writable.split()} on the verifier's PATH {verifier[2]!r}")
    if not verifier[0] or verifier[0] == agent[0] or not verifier[1]:
        raise Failed(
            f"the verifier's HOME {verifier[0]!r} and TMPDIR {verifier[1]!r} are not its own "
            f"(the agent's: {agent[0]!r}, {agent[1]!r})"
        )
    planted = await session.exec(
        f'ls -A "$HOME" "$TMPDIR" | grep -x {plant}', caller=Caller.verifier, timeout_s=COMMAND_TIMEOUT_S
    )
    if planted.exit_code == 0:
        raise Failed("the verifier's HOME or TMPDIR holds a file the agent wrote into its own")


async def _verifier_uid(session: EnvironmentSession) -> None:
    agent = (await _run(session, "id -u")).strip()
    verifier = (await _run(session, "id -u", Caller.verifier)).strip()
    if agent == verifier:
        raise Failed(f"the agent's and the verifier's commands both run as uid {agent}")


async def _scratch_hidden(session: EnvironmentSession) -> None:
    seen = await session.exec(f"ls -A {session.scratch}", timeout_s=COMMAND_TIMEOUT_S)
    if seen.exit_code == 0:
        raise Failed(f"the agent's command listed scratch ({session.scratch})")


async def _network_none(environment: Environment) -> None:
    if NetworkPolicy.none not in environment.supported_policies:
        raise NotApplicable(f"{environment.config.id!r} does not offer the network policy none")
    with closing(socket.socket()) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        async with opened(environment, NetworkPolicy.none) as session:
            reach = await session.exec(
                f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo reached", timeout_s=COMMAND_TIMEOUT_S
            )
    if reach.exit_code == 0:
        raise Failed(f"under network none an agent's command reached the host's 127.0.0.1:{port}")


SESSION_CHECKS: dict[str, Callable[[EnvironmentSession], Awaitable[None]]] = {
    "paths": _paths,
    "exit_and_streams": _exit_and_streams,
    "output_bounds": _output_bounds,
    "timeout": _timeout,
    "timeout_kills_group": _timeout_kills_group,
    "cancellation_kills_group": _cancellation_kills_group,
    "verifier_context": _verifier_context,
    "verifier_uid": _verifier_uid,
    "scratch_hidden": _scratch_hidden,
}
ENVIRONMENT_CHECKS: dict[str, Callable[[Environment], Awaitable[None]]] = {"network_none": _network_none}
CHECKS = (*SESSION_CHECKS, *ENVIRONMENT_CHECKS)


def _judged(environment: Environment, name: str, problem: BaseException | None) -> CheckResult:
    why = environment.gives_up.get(name)
    if isinstance(problem, NotApplicable):
        return CheckResult(name=name, outcome=Outcome.not_applicable, detail=str(problem))
    if problem is None:
        return CheckResult(
            name=name,
            outcome=Outcome.passed,
            detail="" if why is None else f"here, though the provider gives it up: {why}",
        )
    detail = str(problem) if isinstance(problem, Failed) else f"{type(problem).__name__}: {problem}"
    if why is not None:
        return CheckResult(name=name, outcome=Outcome.given_up, detail=f"{why} (seen: {detail})")
    return CheckResult(name=name, outcome=Outcome.failed, detail=detail)


async def _run_check(environment: Environment, name: str, running: Awaitable[None]) -> CheckResult:
    """One check, judged alone: what it raised is its result, never the kit's end."""
    try:
        await running
    except Exception as exc:
        return _judged(environment, name, exc)
    return _judged(environment, name, None)


async def check_async(environment: Environment) -> list[CheckResult]:
    """Every check against ``environment``, in CHECKS' order: the session's checks one after another in one
    session (a container per check would make the kit slow where the provider is), each judged alone."""
    async with opened(environment) as session:
        results = [
            await _run_check(environment, name, session_check(session))
            for name, session_check in SESSION_CHECKS.items()
        ]
    return results + [
        await _run_check(environment, name, environment_check(environment))
        for name, environment_check in ENVIRONMENT_CHECKS.items()
    ]


def check(environment: Environment) -> list[CheckResult]:
    """``check_async`` on an event loop of its own."""
    return asyncio.run(check_async(environment))


def assert_conformant(environment: Environment, results: list[CheckResult] | None = None) -> list[CheckResult]:
    """The checks' results (``results``, when already made); AssertionError listing each failed check and
    what it saw."""
    results = check(environment) if results is None else results
    failed = [f"{r.name}: {r.detail}" for r in results if r.outcome == Outcome.failed]
    assert not failed, f"environment {environment.config.id!r} fails the conformance kit:\n" + "\n".join(failed)
    return results
