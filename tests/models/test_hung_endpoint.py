"""A model endpoint that never answers is the infrastructure's failure, not the agent's (issue 37, finding
8): an attempt cut by its time (attempt_timeout_s, max_wall_s) while a model call had no response, on an
endpoint that does not answer GET /models either, is an error naming the endpoint, left out of accuracy
(error_rate), run again by a re-run, and the run exits 3. What the endpoint answered stays the agent's
time: a status line whose body never comes, or a model still generating on a live endpoint.

The runs are `agentcompass run` in this process, against the real `openai_compat` plugin through the
SDK; the endpoints are TCP servers on 127.0.0.1 that count what they receive."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import run_cli, write_sweep
from fake_openai import FakeOpenAI, fake_openai_server, tool_call  # noqa: F401

from agentcompass_dagster.plugins.harnesses.miniswe import quiet_import
from agentcompass_dagster.reporting.results import load_metrics, load_task_results

TASK = "count-errors"
CUT_S = 3
NEVER_S = 3600.0
# A status line, headers that promise a body, and a body that never comes.
STALLED = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"


class SilentEndpoint:
    """Accepts every connection and reads each request; sends nothing, or (``stall_body``) only ``STALLED``."""

    def __init__(self, stall_body: bool = False) -> None:
        self.stall_body = stall_body
        self.request_lines: list[str] = []
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._accept, name="silent-endpoint", daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def chat_requests(self) -> int:
        with self._lock:
            return sum(line.startswith("POST /v1/chat/completions") for line in self.request_lines)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        received = b""
        try:
            while b"\r\n\r\n" not in received:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                received += chunk
            with self._lock:
                self.request_lines.append(received.split(b"\r\n", 1)[0].decode())
            if self.stall_body:
                connection.sendall(STALLED)
        except OSError:
            return  # the client gave up

    def close(self) -> None:
        # shutdown wakes the blocked accept(); close alone would not.
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)
        with self._lock:
            for connection in self._connections:
                connection.close()


@pytest.fixture
def endpoints() -> Iterator[Callable[[bool], SilentEndpoint]]:
    """Starts SilentEndpoints (``stall_body`` or not), closed at the test's end."""
    started: list[SilentEndpoint] = []

    def start(stall_body: bool) -> SilentEndpoint:
        started.append(SilentEndpoint(stall_body))
        return started[-1]

    try:
        yield start
    finally:
        for endpoint in started:
            endpoint.close()


def sweep(tmp_path: Path, base_url: str, harness: str = "tool_agent", **limits: Any) -> Path:
    """The model's own timeout (600 s) is far beyond the attempt's: the attempt's cut ends the call."""
    if harness == "miniswe":
        with quiet_import():
            pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed (extra 'miniswe')")
    model = {
        "id": "endpoint",
        "provider": "openai_compat",
        "model": "served",
        "base_url": base_url,
        "params": {"timeout_s": 600, "max_retries": 0},
    }
    return write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "tasks": [TASK]}],
        models=[model],
        harness={"id": harness},
        execution={"limits": {"task_concurrency": 1, **limits}},
    )


def newest(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], float]:
    """The newest run's task row (task_results.parquet), the attempt of its detail, and its error_rate."""
    results = tmp_path / "results"
    (row,) = load_task_results(results).to_dict("records")
    metrics = load_metrics(results)
    error_rate = float(metrics.loc[metrics["metric"] == "error_rate", "value"].iloc[0])
    (detail_path,) = (results / "sweep" / "demo" / "endpoint" / row["run_id"] / "details").glob("*.json")
    return row, json.loads(detail_path.read_text())["attempts"]["1"], error_rate


@pytest.mark.parametrize("harness", ["tool_agent", "miniswe"])
def test_an_endpoint_that_never_answers_is_an_error_run_again_on_reuse(
    tmp_path: Path, endpoints: Callable[[bool], SilentEndpoint], harness: str
) -> None:
    """issue 37 (finding 8), R-REUSE-4: the endpoint accepts the call and sends nothing, nor to GET /models.
    attempt_timeout_s cuts the call: the attempt is `error`, naming the endpoint, not the agent's
    timeout; error_rate 1.0 and exit 3. A re-run with reuse sends the task to the model again."""
    silent = endpoints(False)
    path = sweep(tmp_path, silent.base_url, harness, attempt_timeout_s=CUT_S)
    assert run_cli("run", path, "--direct") == 3
    assert silent.chat_requests() == 1, silent.request_lines
    row, attempt, error_rate = newest(tmp_path)
    assert attempt["status"] == "error" and attempt["failure"] is None, attempt["failure"]
    assert f"model endpoint {silent.base_url}/ gave no response" in row["error"]
    assert error_rate == 1.0

    assert run_cli("run", path, "--direct", "--reuse") == 3
    assert silent.chat_requests() == 2, "the re-run did not send the errored task to the model again"
    row, attempt, _ = newest(tmp_path)
    assert attempt["status"] == "error" and not row["reused"]


def test_max_wall_s_cutting_a_call_that_never_answers_is_an_error_run_again_on_reuse(
    tmp_path: Path, endpoints: Callable[[bool], SilentEndpoint]
) -> None:
    """issue 37 (finding 8): the same silent endpoint, the call cut by the agent's max_wall_s (tool_agent
    records the limit and ends on its own): an error naming the endpoint, no limit recorded; the
    attempt's log ends in error, so the re-run sends the task again instead of resuming a finished one."""
    silent = endpoints(False)
    path = sweep(tmp_path, silent.base_url, max_wall_s=CUT_S)
    assert run_cli("run", path, "--direct") == 3
    row, attempt, error_rate = newest(tmp_path)
    assert (attempt["status"], attempt["failure"], attempt["limit"]) == ("error", None, None)
    assert f"model endpoint {silent.base_url}/ gave no response" in row["error"]
    assert error_rate == 1.0

    assert run_cli("run", path, "--direct", "--reuse") == 3
    assert silent.chat_requests() == 2, "the re-run did not send the errored task to the model again"


def test_a_status_line_whose_body_never_comes_is_the_agents_time(
    tmp_path: Path, endpoints: Callable[[bool], SilentEndpoint], capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 37 (finding 8), the counter-case: the endpoint answered (status line and headers), then
    stalled the body. The attempt timeout is the agent's: `timeout`, scored 0, error_rate 0, exit 0."""
    stalled = endpoints(True)
    path = sweep(tmp_path, stalled.base_url, attempt_timeout_s=CUT_S)
    assert run_cli("run", path, "--direct") == 0
    assert "1 failed by the agent · 0 errors" in capsys.readouterr().out
    row, attempt, error_rate = newest(tmp_path)
    assert attempt["status"] == "timeout" and f"attempt timed out after {CUT_S}s" in attempt["failure"]
    assert pd.isna(row["error"])
    assert error_rate == 0.0


def test_a_model_still_generating_at_max_wall_s_is_the_agents_time(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """issue 37 (finding 8), the counter-case: a non-streamed completion has no status line until it is
    whole, so a live endpoint still generating looks like a silent one until it is asked GET /models,
    which it answers. max_wall_s cuts the call: the agent's limit, scored 0, error_rate 0, exit 0."""
    fake_openai.reply(tool_calls=[tool_call("bash", json.dumps({"command": "echo first"}))])
    fake_openai.reply(content="too late", delay_s=NEVER_S)
    path = sweep(tmp_path, fake_openai.base_url, max_wall_s=CUT_S)
    assert run_cli("run", path, "--direct") == 0
    row, attempt, error_rate = newest(tmp_path)
    assert attempt["limit"]["limit"] == "max_wall_s" and attempt["run_error"] is None
    assert pd.isna(row["error"]) and not row["correct"] and error_rate == 0.0
    assert fake_openai.model_listings == 1 and len(fake_openai.requests) == 2
