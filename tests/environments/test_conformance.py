"""Issue 40: the environment conformance kit (contracts/conformance.py) against the built-in providers and the
third-party example, and against a careless provider, whose broken promises it names."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from conftest import IMAGE, REPO, needs_docker

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.capture import capture_file
from agentcompass_dagster.contracts.conformance import CHECKS, CheckResult, Outcome, assert_conformant, check
from agentcompass_dagster.contracts.environment import Caller, Environment, ExecResult
from agentcompass_dagster.plugins.environments.docker import DockerEnvironment
from agentcompass_dagster.plugins.environments.local import LocalEnvironment
from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The third-party example's module (tests/third_party/acme_plugins/environment.py)."""
    monkeypatch.syspath_prepend(str(REPO / "tests" / "third_party"))
    from acme_plugins import environment

    return environment


def _outcomes(results: list[CheckResult]) -> dict[str, Outcome]:
    assert [r.name for r in results] == list(CHECKS)
    return {r.name: r.outcome for r in results}


PROVIDERS = [
    pytest.param(lambda acme: LocalEnvironment(EnvironmentConfig(id="local")), id="local"),
    pytest.param(lambda acme: SandboxEnvironment(EnvironmentConfig(id="sandbox")), marks=needs_bwrap, id="sandbox"),
    pytest.param(
        lambda acme: DockerEnvironment(EnvironmentConfig(id="docker", params={"image": IMAGE})),
        marks=needs_docker,
        id="docker",
    ),
    pytest.param(
        lambda acme: acme.TempDirEnvironment(EnvironmentConfig(id="acme-local", provider="acme-local")),
        id="third-party",
    ),
]


@pytest.mark.parametrize("make", PROVIDERS)
def test_every_provider_keeps_what_it_promises(make: Callable[[Any], Environment], acme: Any) -> None:
    """Issue 40: each built-in provider and the third-party example pass every check of the kit but those
    it gives up (Environment.gives_up); each given-up check names why. Before: docker left a cancelled
    command's background processes running (cancellation_kills_group), and the example's verifier shared
    the agent's HOME, TMPDIR and PATH and its cancelled command lived on."""
    environment = make(acme)
    outcomes = _outcomes(assert_conformant(environment))
    given_up = {name for name, outcome in outcomes.items() if outcome is Outcome.given_up}
    assert given_up <= set(environment.gives_up)
    for name in ("paths", "cancellation_kills_group", "timeout_kills_group"):
        assert outcomes[name] is Outcome.passed, name
    expected_network = Outcome.passed if len(environment.supported_policies) > 1 else Outcome.not_applicable
    assert outcomes["network_none"] is expected_network
    if isinstance(environment, (SandboxEnvironment, DockerEnvironment)):
        assert outcomes["verifier_context"] is outcomes["scratch_hidden"] is Outcome.passed


def test_the_kit_names_each_promise_a_careless_provider_breaks(acme: Any) -> None:
    """Issue 40: the example as it was (its verifier in the agent's context, its cancelled command left
    running) fails the kit on exactly those two checks, each with what was seen, and assert_conformant
    says so in its message; what the provider gives up is reported apart."""

    class CarelessSession(acme.TempDirSession):  # type: ignore[misc, name-defined]
        async def exec(
            self,
            command: str,
            *,
            timeout_s: float | None = None,
            cwd: str | None = None,
            caller: Caller = Caller.agent,
            label: str | None = None,
            env: Mapping[str, str] | None = None,
        ) -> ExecResult:
            with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
                proc = await asyncio.create_subprocess_exec(
                    "bash",
                    "-c",
                    command,
                    cwd=cwd or self.workdir,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    env={**os.environ, **(env or {})},
                )
                done, _ = await asyncio.wait([asyncio.ensure_future(proc.wait())], timeout=timeout_s)
                if not done:
                    os.killpg(proc.pid, signal.SIGKILL)
                return ExecResult.captured(
                    await proc.wait(), capture_file(out.fileno()), capture_file(err.fileno()), 0.0, timed_out=not done
                )

    class CarelessEnvironment(acme.TempDirEnvironment):  # type: ignore[misc, name-defined]
        gives_up = {name: acme.TempDirEnvironment.gives_up[name] for name in ("verifier_uid", "scratch_hidden")}

        async def open(self, plan: Any, task: Any) -> Any:
            return CarelessSession()

    environment = CarelessEnvironment(EnvironmentConfig(id="careless", provider="acme-local"))
    results = check(environment)
    failed = {r.name: r.detail for r in results if r.outcome is Outcome.failed}
    assert set(failed) == {"verifier_context", "cancellation_kills_group"}, results
    assert "still running" in failed["cancellation_kills_group"]
    assert "the verifier's Python settings were ['', '', '1']" in failed["verifier_context"]
    assert {r.name for r in results if r.outcome is Outcome.given_up} == {"verifier_uid", "scratch_hidden"}
    with pytest.raises(AssertionError) as refused:
        assert_conformant(environment, results)
    assert "'careless' fails the conformance kit" in str(refused.value)
    assert "cancellation_kills_group: " in str(refused.value)
