"""The model gateway's own cost per model call (issue 38): how long the gateway takes from a request's
bytes in to the response's bytes out when its Answer returns at once, and how much the process grows.

One process: a ModelGateway on a unix socket, and a bare HTTP/1.1 client on one keep-alive connection
(a few microseconds a call, so what is timed is the gateway: aiohttp, the token and rate checks, the
translation by the gateway's converters, the reply). For each API family, plain and streaming, --n calls in
a row with a small conversation with one tool (about 2 KB) and a turn of text and one tool call; the
Answer's own time (near zero) is measured and taken off. RSS is read from /proc: before the gateway's
modules are imported, after the gateway's start, after a warm-up, and after all the calls; what a run
pays is the growth from before the imports to after the calls.

    python perf/bench_gateway.py [--n 2000] [--json]

Targets (issue 38): at most 2 ms added per call, at most 50 MB per run. Reported, never asserted; run it
on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


RSS_BEFORE_IMPORTS_MB = rss_mb()  # read before the gateway's modules (and whatever they import) load

from agentcompass_dagster.contracts.model import ModelTurn, ToolCall  # noqa: E402
from agentcompass_dagster.gateway.calls import Api, GatewayCall  # noqa: E402
from agentcompass_dagster.gateway import server  # noqa: E402
from agentcompass_dagster.gateway.server import ModelGateway  # noqa: E402

TARGET_MS_PER_CALL = 2.0
TARGET_RUN_MB = 50.0
WARM_UP = 50
PATHS: dict[Api, str] = {
    "chat_completions": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}
TURN = ModelTurn(
    content="Let me look at the files first.",
    tool_calls=[ToolCall(id="call_1", name="bash", arguments='{"command": "ls -la /work"}')],
    usage={"prompt_tokens": 812, "completion_tokens": 23},
    model_id="bench-model",
)
PARAMETERS = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
INSTRUCTIONS = "You are a careful engineer. Use the bash tool to inspect the repository. " * 8
QUESTION = "Count the lines that mention ERROR in /work/app.log and answer with the number. " * 4


def request_body(api: Api, stream: bool) -> bytes:
    """A first request of an agent with one tool, as each API family's SDK sends it."""
    if api == "chat_completions":
        body: dict[str, Any] = {
            "model": "m",
            "messages": [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": QUESTION}],
            "tools": [
                {"type": "function", "function": {"name": "bash", "description": "run", "parameters": PARAMETERS}}
            ],
        }
    elif api == "responses":
        body = {
            "model": "m",
            "instructions": INSTRUCTIONS,
            "input": QUESTION,
            "store": False,
            "tools": [{"type": "function", "name": "bash", "description": "run", "parameters": PARAMETERS}],
        }
    else:
        body = {
            "model": "m",
            "max_tokens": 4096,
            "system": INSTRUCTIONS,
            "messages": [{"role": "user", "content": QUESTION}],
            "tools": [{"name": "bash", "description": "run", "input_schema": PARAMETERS}],
        }
    return json.dumps({**body, "stream": stream}).encode()


class Instant:
    """The Answer: the same turn at once, its own time summed."""

    def __init__(self) -> None:
        self.seconds = 0.0

    async def __call__(self, call: GatewayCall) -> ModelTurn:
        started = time.perf_counter()
        turn = TURN.model_copy()
        self.seconds += time.perf_counter() - started
        return turn


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    """Send one request on the kept-alive connection and read its whole response; its status."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def measure(n: int) -> dict[str, Any]:
    answer = Instant()
    with tempfile.TemporaryDirectory(prefix="bench-gw-") as directory:
        gateway = ModelGateway(Path(directory), max_calls_per_s=1e9)
        await gateway.start()
        token = gateway.admit(answer)
        rss_started = rss_mb()
        reader, writer = await asyncio.open_unix_connection(str(gateway.socket_path))
        result: dict[str, Any] = {"n": n, "rss_after_start_mb": round(rss_started, 1), "ms_per_call": {}}
        for count, label in ((WARM_UP, None), (n, "measured")):
            for api, path in PATHS.items():
                for stream in (False, True):
                    body = request_body(api, stream)
                    request = (
                        f"POST {path} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {token}\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    ).encode() + body
                    answer.seconds = 0.0
                    started = time.perf_counter()
                    for _ in range(count):
                        assert await exchange(reader, writer, request) == 200
                    elapsed = time.perf_counter() - started - answer.seconds
                    if label:
                        result["ms_per_call"][f"{api}{' stream' if stream else ''}"] = round(1000 * elapsed / count, 3)
            if label is None:
                rss_warm = rss_mb()
        writer.close()
        result["forwarder_ms_per_call"] = await through_forwarder(gateway, token, n)
        await gateway.close()
    result["rss_after_warm_up_mb"] = round(rss_warm, 1)
    rss_end = rss_mb()
    result["rss_growth_mb"] = round(rss_end - rss_warm, 1)
    result["rss_run_mb"] = round(rss_end - RSS_BEFORE_IMPORTS_MB, 1)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


async def through_forwarder(gateway: ModelGateway, token: str, n: int) -> float:
    """What the environment's forwarder (gateway/forward.py, its own process) adds to a plain chat call:
    the same calls over TCP through it, less the calls straight to the socket."""
    with tempfile.TemporaryDirectory(prefix="bench-fw-") as directory:
        port_file = Path(directory) / "port"
        forwarder = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(server.__file__).with_name("forward.py")),
            str(gateway.socket_path),
            "0",
            str(port_file),
        )
        try:
            while not port_file.exists() or not port_file.read_text().endswith("\n"):
                await asyncio.sleep(0.01)
            port = int(port_file.read_text())
            body = request_body("chat_completions", False)
            request = (
                f"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body
            timings = []
            for opened in (
                asyncio.open_unix_connection(str(gateway.socket_path)),
                asyncio.open_connection("127.0.0.1", port),
            ):
                reader, writer = await opened
                for _ in range(WARM_UP):
                    await exchange(reader, writer, request)
                started = time.perf_counter()
                for _ in range(n):
                    assert await exchange(reader, writer, request) == 200
                timings.append(time.perf_counter() - started)
                writer.close()
        finally:
            forwarder.kill()
            await forwarder.wait()
    return round(1000 * (timings[1] - timings[0]) / n, 3)


def main_bench(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="calls per API family and mode")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.n))
    result["rss_before_imports_mb"] = round(RSS_BEFORE_IMPORTS_MB, 1)
    if args.json:
        print(json.dumps(result))
        return result
    print(
        f"gateway cost per call over {args.n} calls each (Answer's time taken off; target <= {TARGET_MS_PER_CALL} ms):"
    )
    for mode, ms in result["ms_per_call"].items():
        print(f"  {mode:28} {ms:7.3f} ms/call")
    print(
        f"RSS: {result['rss_before_imports_mb']} MB before the imports, {result['rss_after_start_mb']} MB after "
        f"them and the start, {result['rss_after_warm_up_mb']} MB after warm-up; grew {result['rss_growth_mb']} MB "
        f"over {6 * args.n} calls; a run pays {result['rss_run_mb']} MB (target <= {TARGET_RUN_MB} MB per run)"
    )
    print(f"the environment's forwarder (forward.py) adds {result['forwarder_ms_per_call']} ms per call")
    return result


if __name__ == "__main__":
    sys.exit(0 if main_bench() else 1)
