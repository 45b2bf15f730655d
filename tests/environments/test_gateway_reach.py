"""Issue 38: an agent inside the sandbox or a container, under network ``none``, reaches the model
gateway (a unix socket of the host, bound at GATEWAY_DIR through ``ExecutionPlan.mounts``) through the
forwarder on the environment's own 127.0.0.1, and nothing else of the host (R-NET-1). The plan's mounts
are bound for the agent's and the reference's commands, never the verifier's; read-only where declared,
writable by the agent's user otherwise; ``local``, which can bind nothing, refuses a plan with mounts."""

from __future__ import annotations

import asyncio
import http.server
import os
import shutil
import socketserver
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import IMAGE, needs_docker, opened_session

from agentcompass_dagster.contracts.declarations import EnvironmentConfig
from agentcompass_dagster.contracts.environment import Caller, Environment, EnvironmentSession, ExecResult
from agentcompass_dagster.contracts.records import ExecutionPlan, HostMount, NetworkPolicy
from agentcompass_dagster.plugins.environments.docker import DockerEnvironment
from agentcompass_dagster.plugins.environments.local import LocalEnvironment
from agentcompass_dagster.plugins.environments.sandbox import SandboxEnvironment
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.gateway.forwarding import (
    GATEWAY_DIR,
    GATEWAY_SOCKET,
    NO_RUNTIME,
    forwarded,
    install_forwarder,
)

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
ENVIRONMENTS = [
    pytest.param(lambda: SandboxEnvironment(EnvironmentConfig(id="sandbox")), marks=needs_bwrap, id="sandbox"),
    pytest.param(
        lambda: DockerEnvironment(EnvironmentConfig(id="docker", params={"image": IMAGE})),
        marks=needs_docker,
        id="docker",
    ),
]
NO_NETWORK = {f"{phase}_network_policy": NetworkPolicy.none for phase in ("baseline", "run", "evaluation")}
BODY = "hello from the gateway"


def get(base: str = "os.environ['AGENTCOMPASS_GATEWAY_URL']") -> str:
    """A GET of ``base`` (a Python expression) + /v1/models with the environment's Python (a minimal image
    has no curl); by default through the forwarder."""
    fetch = f"urllib.request.urlopen({base} + '/v1/models', timeout=20).read().decode()"
    return f'python3 -c "import os, urllib.request; print({fetch})"'


GET = get()
AGENT_UID = 65534


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _Answer(http.server.BaseHTTPRequestHandler):
    def address_string(self) -> str:
        return "unix"

    def do_GET(self) -> None:
        body = f"{BODY} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Path]:
    """A gateway's directory on the host: an HTTP server on its unix socket (which the environment's
    unprivileged user may connect to) and the forwarder scripts."""
    directory = tmp_path / "gateway"
    directory.mkdir(mode=0o755)
    server = _UnixHTTPServer(str(directory / "model.sock"), _Answer)
    os.chmod(directory / "model.sock", 0o666)
    install_forwarder(directory)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield directory
    server.shutdown()
    server.server_close()
    thread.join()


def _run(
    opened: tuple[EnvironmentSession, asyncio.AbstractEventLoop], command: str, caller: Caller = Caller.agent
) -> ExecResult:
    session, loop = opened
    return loop.run_until_complete(session.exec(command, caller=caller, timeout_s=50))


@pytest.mark.parametrize("make", ENVIRONMENTS)
def test_the_agent_reaches_the_gateway_and_nothing_else(make: Any, gateway: Path, host_server: int) -> None:
    """Issue 38, R-NET-1: under network none, a GET from inside the environment to the forwarder on its
    127.0.0.1 reaches the host's gateway socket and returns its body, for the agent and the reference;
    a TCP server on the host's 127.0.0.1 stays out of reach. Before: the plan's mounts were not bound,
    and the forwarder had no gateway to reach."""
    mounts = [HostMount(host_path=gateway, path=GATEWAY_DIR)]
    with opened_session(make(), mounts=mounts, **NO_NETWORK) as opened:
        for caller in (Caller.agent, Caller.reference):
            reached = _run(opened, forwarded(GET), caller)
            assert reached.exit_code == 0 and reached.stdout == f"{BODY} /v1/models\n", reached
        host = _run(opened, forwarded(get(f"'http://127.0.0.1:{host_server}'")))
        assert host.exit_code != 0 and "URLError" in host.stderr, host


@pytest.mark.parametrize("make", ENVIRONMENTS)
def test_a_port_line_the_wait_cuts_in_two_is_read_whole(make: Any, gateway: Path) -> None:
    """Issue 38: a forwarder whose port line arrives in two parts, the second after the wait's tenth of a
    second (a loaded machine that deschedules the writer), is still reached on its whole port. Before:
    bash's ``read -t`` handed back the first part on the timeout and the next read took the rest for the
    port, and the agent's calls were refused (a CI failure: codex scored wrong without one model call)."""
    forwarder = gateway / "forward.py"
    whole = 'out.write("%d\\n" % listener.getsockname()[1])'
    split = (
        'line = "%d\\n" % listener.getsockname()[1]\n        out.write(line[:2])\n        out.flush()\n'
        '        __import__("time").sleep(0.5)\n        out.write(line[2:])'
    )
    source = forwarder.read_text()
    assert whole in source
    forwarder.write_text(source.replace(whole, split))
    with opened_session(make(), mounts=[HostMount(host_path=gateway, path=GATEWAY_DIR)], **NO_NETWORK) as opened:
        reached = _run(opened, forwarded(GET))
        assert reached.exit_code == 0 and reached.stdout == f"{BODY} /v1/models\n", reached


@pytest.mark.parametrize("make", ENVIRONMENTS)
def test_the_verifier_never_sees_the_mounts(make: Any, gateway: Path) -> None:
    """Issue 38: the gateway's socket is in GATEWAY_DIR for the agent's commands and absent from the
    verifier's, before and after the agent runs again (docker hides and shows it between commands of one
    container). Before: the agent's commands did not see it either."""
    mounts = [HostMount(host_path=gateway, path=GATEWAY_DIR)]
    probe = f"test -S {GATEWAY_SOCKET} && echo seen || echo unseen"
    with opened_session(make(), mounts=mounts, **NO_NETWORK) as opened:
        seen = [
            _run(opened, probe, caller).stdout.strip()
            for caller in (Caller.agent, Caller.verifier, Caller.agent, Caller.verifier, Caller.reference)
        ]
        assert seen == ["seen", "unseen", "seen", "unseen", "seen"]
        reached = _run(opened, forwarded(GET), Caller.agent)
        assert reached.stdout == f"{BODY} /v1/models\n", reached


@pytest.mark.parametrize("make", ENVIRONMENTS)
def test_a_read_only_mount_stays_so_and_a_writable_one_is_the_agents(make: Any, tmp_path: Path) -> None:
    """Issue 38: the agent reads a read-only mount and cannot write it, nor replace what is in it; it
    writes into a writable mount, whose files the host then finds as the agent's user's. Before: neither
    mount was there."""
    packages, agent = tmp_path / "packages", tmp_path / "agent"
    packages.mkdir(mode=0o755)
    agent.mkdir(mode=0o755)
    (packages / "wheel.txt").write_text("offline package\n")
    mounts = [
        HostMount(host_path=packages, path="/opt/agentcompass/packages"),
        HostMount(host_path=agent, path="/opt/agentcompass/agent", read_only=False),
    ]
    with opened_session(make(), mounts=mounts, **NO_NETWORK) as opened:
        read = _run(opened, "cat /opt/agentcompass/packages/wheel.txt")
        assert read.stdout == "offline package\n", read
        for write in ("echo x > /opt/agentcompass/packages/wheel.txt", "touch /opt/agentcompass/packages/new"):
            refused = _run(opened, write)
            assert refused.exit_code != 0 and "Read-only file system" in refused.stderr, refused
        made = _run(opened, "mkdir -p /opt/agentcompass/agent/bin && echo installed > /opt/agentcompass/agent/bin/tool")
        assert made.exit_code == 0, made
    assert (packages / "wheel.txt").read_text() == "offline package\n" and not (packages / "new").exists()
    tool = agent / "bin" / "tool"
    assert tool.read_text() == "installed\n"
    if os.geteuid() == 0:
        assert tool.stat().st_uid == AGENT_UID


@needs_bwrap
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_forwarder_runs_on_node_where_there_is_no_python(gateway: Path, tmp_path: Path) -> None:
    """Issue 38: in an environment with node but no python3 the forwarder is forward.js, and a GET made
    with node reaches the gateway; with neither, the command exits 127 with one line saying why."""
    tools = tmp_path / "tools"
    tools.mkdir(mode=0o755)
    for name in ("bash", "mktemp", "mkfifo", "rm", "node"):
        os.symlink(shutil.which(name, path="/usr/bin:/bin") or "", tools / name)
    mounts = [HostMount(host_path=gateway, path=GATEWAY_DIR), HostMount(host_path=tools, path="/opt/tools")]
    get = (
        "node -e \"require('http').get(process.env.AGENTCOMPASS_GATEWAY_URL + '/node', "
        "r => r.on('data', d => process.stdout.write(d)))\""
    )
    with opened_session(SandboxEnvironment(EnvironmentConfig(id="sandbox")), mounts=mounts, **NO_NETWORK) as opened:
        reached = _run(opened, "PATH=/opt/tools\n" + forwarded(get))
        assert reached.exit_code == 0 and reached.stdout == f"{BODY} /node", reached
        (tools / "node").unlink()
        missing = _run(opened, "PATH=/opt/tools\n" + forwarded(get))
        assert missing.exit_code == 127 and missing.stderr.strip() == NO_RUNTIME, missing


def test_local_refuses_a_plan_with_mounts(tmp_path: Path) -> None:
    """Issue 38: ``local`` runs commands as this process's user on the host, where there is nothing to
    bind a mount into nor a verifier to hide it from: a plan with mounts is refused before anything
    runs, with one line naming the environment and where to run it instead."""
    plan = ExecutionPlan(
        task_id="t",
        attempt=1,
        benchmark_id="b",
        harness_id="claude-code",
        environment_id="local",
        model_id="m",
        mounts=[HostMount(host_path=tmp_path, path=GATEWAY_DIR)],
    )
    environment: Environment = LocalEnvironment(EnvironmentConfig(id="local"))
    with pytest.raises(UserError) as refused:
        environment.validate_plan(plan)
    message = str(refused.value)
    assert "\n" not in message and "'local'" in message and GATEWAY_DIR in message
    assert "run it in sandbox or docker" in message
    environment.validate_plan(plan.model_copy(update={"mounts": []}))


def test_the_forwarder_scripts_are_copied_whole(tmp_path: Path) -> None:
    """Issue 38: install_forwarder copies both scripts into the gateway's directory, readable by the
    environment's user, replacing what was there rather than writing through a planted link."""
    outside = tmp_path / "outside"
    outside.write_text("keep")
    directory = tmp_path / "gateway"
    directory.mkdir()
    (directory / "forward.py").symlink_to(outside)
    install_forwarder(directory)
    assert outside.read_text() == "keep"
    for name in ("forward.py", "forward.js"):
        copied = directory / name
        assert not copied.is_symlink() and stat.S_IMODE(copied.stat().st_mode) == 0o644
        assert copied.read_bytes() == (Path(install_forwarder.__code__.co_filename).parent / name).read_bytes()
