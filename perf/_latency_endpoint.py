"""An OpenAI-compatible chat completions endpoint that answers every call after a set latency: the server
``bench_latency.py`` runs in a process of its own (so that its CPU is in no side's measurement and it
shares no GIL with a side), with the Python of the project's venv.

An aiohttp server on 127.0.0.1 (HTTP/1.1, keep-alive): every ``POST .../chat/completions`` waits
--latency seconds (``asyncio.sleep``, so any number of calls wait at once) and then answers, non-streamed
with its ``usage``, or as server-sent events when the request asks for ``stream``. The answer depends on
the request:

* with tools (the ``tool_agent`` harness, whose tool names and argument names are taken from its
  ``TOOL_ARGUMENT``): the turn is the number of assistant messages in the request; turns 0 .. --calls - 2
  answer a call of the shell tool with the command ``echo hi``, the last one a call of the submit tool
  whose answer is the ``answer-<i>`` the task's prompt asks for (the synthetic benchmark's "Reply with
  answer-<i>."), so every task is solved in exactly --calls model calls;
* without tools (Inspect's ``generate()``): a plain text answer, that same ``answer-<i>``.

``GET .../models`` is answered at once (the runtime asks it of an endpoint that left a call without a
response). ``GET /stats`` returns the counters since the previous ``GET /stats`` and resets them: the
chat completions answered, the most in flight at once, those that were streamed, the most any of them
took beyond the latency (from the request's arrival to its answer: a server that falls behind shows it
here) and the requests it refused (400).

Prints ``{"port": PORT}`` on stdout once it listens, then serves until it is terminated.

    python perf/_latency_endpoint.py --latency 0.5 --calls 3 [--port 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import time
from typing import Any

from aiohttp import web

from agentcompass_dagster.plugins.harnesses.tool_agent.tools import TOOL_ARGUMENT

SHELL_TOOL, SUBMIT_TOOL = "bash", "submit"
COMMAND = "echo hi"
ANSWER = re.compile(r"answer-\d+")
MODEL = "latency"
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


class Stats:
    def __init__(self) -> None:
        self.reset()
        self.in_flight = 0

    def reset(self) -> None:
        self.completions = self.streamed = self.refused = self.max_in_flight = 0
        self.max_extra_ms = 0.0

    def take(self) -> dict[str, Any]:
        data = {
            "completions": self.completions,
            "max_in_flight": self.max_in_flight,
            "streamed": self.streamed,
            "max_extra_ms": round(self.max_extra_ms, 3),
            "refused": self.refused,
        }
        self.reset()
        return data


def task_answer(messages: list[dict[str, Any]]) -> str:
    """The answer-<i> the first user message asks for ("done" when there is none)."""
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            if (found := ANSWER.search(text)) is not None:
                return found.group()
    return "done"


def reply(body: dict[str, Any], calls: int) -> dict[str, Any]:
    """The assistant message for one request (see the module docstring); ValueError for a request with
    tools that are not the tool agent's."""
    messages = body.get("messages") or []
    answer = task_answer(messages)
    tools = body.get("tools")
    if not tools:
        return {"role": "assistant", "content": answer}
    offered = {tool.get("function", {}).get("name") for tool in tools}
    if not {SHELL_TOOL, SUBMIT_TOOL} <= offered:
        raise ValueError(
            f"the request offers the tools {sorted(map(str, offered))}, not {SHELL_TOOL} and {SUBMIT_TOOL}"
        )
    turn = sum(message.get("role") == "assistant" for message in messages)
    name, value = (SHELL_TOOL, COMMAND) if turn < calls - 1 else (SUBMIT_TOOL, answer)
    call = {
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({TOOL_ARGUMENT[name]: value})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def completion(message: dict[str, Any]) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-latency",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }


def chunks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The same answer as stream chunks: the whole delta, then the finish reason, then the usage."""
    base = {"id": "chatcmpl-latency", "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL}
    delta = dict(message)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(delta["tool_calls"])]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**base, "choices": [], "usage": USAGE},
    ]


def make_app(latency: float, calls: int) -> web.Application:
    stats = Stats()

    async def chat(request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = await request.json()
        try:
            message = reply(body, calls)
        except ValueError as exc:
            stats.refused += 1
            return web.json_response({"error": {"message": str(exc), "type": "invalid_request_error"}}, status=400)
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            await asyncio.sleep(latency)
        finally:
            stats.in_flight -= 1
        if body.get("stream"):
            stats.streamed += 1
            response = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
            await response.prepare(request)
            for chunk in chunks(message):
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        else:
            response = web.json_response(completion(message))
        stats.completions += 1
        stats.max_extra_ms = max(stats.max_extra_ms, 1000.0 * (time.perf_counter() - arrived - latency))
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def take_stats(request: web.Request) -> web.Response:
        return web.json_response(stats.take())

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/models", models)
    app.router.add_get("/stats", take_stats)
    return app


async def serve(latency: float, calls: int, port: int) -> None:
    runner = web.AppRunner(make_app(latency, calls), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    print(json.dumps({"port": runner.addresses[0][1]}), flush=True)
    await stop.wait()
    await runner.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, required=True, help="seconds before every chat completion's answer")
    parser.add_argument("--calls", type=int, required=True, help="model calls per conversation with tools (>= 1)")
    parser.add_argument("--port", type=int, default=0, help="default: any free port")
    args = parser.parse_args()
    if args.latency < 0 or args.calls < 1:
        parser.error("--latency must be >= 0 and --calls >= 1")
    asyncio.run(serve(args.latency, args.calls, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
