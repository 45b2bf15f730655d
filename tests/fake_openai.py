"""A small OpenAI-compatible HTTP server for tests: scripted responses, recorded requests.

Tests talk to it through the real ``openai`` SDK, so retries, timeouts and headers are the SDK's own.
``tests/`` is on sys.path (pyproject's ``pythonpath = ["tests"]``, for the tests in its subfolders too),
hence the bare import:

    from fake_openai import FakeOpenAI, fake_openai_server  # noqa: F401  (registers the fixture)

    def test_turn(fake_openai: FakeOpenAI) -> None:
        fake_openai.push(429, {"error": {"message": "slow down"}})
        fake_openai.reply(content="hello")
        ...  # a model with base_url=fake_openai.base_url gets a 429, then the turn
        assert len(fake_openai.requests) == 2
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

import pytest

# The SDK ignores `retry-after: 0` (it honours only positive delays) and backs off 0.5 s and more instead;
# one millisecond keeps retried tests fast.
FAST_RETRY = {"retry-after-ms": "1"}
# The command that solves the demo task count-errors (its answer is 5).
COUNT_ERRORS = "awk '$3 == \"ERROR\" {n++} END {print n+0}' app.log > answer.txt && cat answer.txt"


@dataclass
class Reply:
    status: int
    body: dict[str, Any] | str
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class Request(NamedTuple):
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


def tool_call(name: str, arguments: str, call_id: str | None = None) -> dict[str, Any]:
    """A function tool call; ``arguments`` is sent verbatim, malformed JSON included."""
    return {"id": call_id or f"call_{name}", "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "fake-model",
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A chat completion body with one choice."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


class FakeOpenAI:
    """Serves pushed replies in order on 127.0.0.1; with none left it answers 500 and says so. ``GET
    /models`` is answered at once, apart from the queue (the runtime asks it of an endpoint that left a
    call without a response: a server that is alive answers it while it generates)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.model_listings = 0
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        # Set on close so a delayed reply stops sleeping instead of outliving the test.
        self._closed = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # A short poll interval: shutdown waits for the next poll, and every test shuts a server down.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}/v1"

    def push(
        self, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None, delay_s: float = 0.0
    ) -> None:
        """Queue one reply; error replies ask for a 1 ms retry delay unless ``headers`` say otherwise."""
        reply_headers = dict(FAST_RETRY) if status >= 400 else {}
        reply_headers.update(headers or {})
        with self._lock:
            self._replies.append(Reply(status, body, reply_headers, delay_s))

    def reply(
        self,
        content: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: dict[str, Any] | None = None,
        delay_s: float = 0.0,
        **fields: Any,
    ) -> None:
        """Queue a 200 chat completion (see ``completion``), sent ``delay_s`` after the request arrives."""
        self.push(200, completion(content, tool_calls, usage, **fields), delay_s=delay_s)

    def close(self) -> None:
        self._closed.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        # x-should-retry stops the SDK from retrying a test that simply pushed too few replies.
        message = f"fake OpenAI server: no reply queued for request {len(self.requests)} ({request.path})"
        return Reply(500, {"error": {"message": message, "type": "fake_server"}}, {"x-should-retry": "false"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    with fake._lock:
                        fake.model_listings += 1
                    self._send(Reply(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}))
                    return
                self._answer(None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                self._answer(body)

            def _answer(self, body: Any) -> None:
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply = fake._next(Request(self.path, headers, body))
                if reply.delay_s and fake._closed.wait(reply.delay_s):
                    return
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                data = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nobody is left to answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def solve_count_errors(fake: FakeOpenAI) -> None:
    """Queue a 429, then the two turns that solve the demo task count-errors (bash writes the answer, then
    submit), with usage: 500 input tokens of which 100 cached, 30 output."""
    fake.push(429, {"error": {"message": "slow down"}})
    fake.reply(
        tool_calls=[tool_call("bash", json.dumps({"command": COUNT_ERRORS}))],
        usage={"prompt_tokens": 200, "completion_tokens": 20},
    )
    fake.reply(
        tool_calls=[tool_call("submit", json.dumps({"answer": "5"}), "call_2")],
        usage={"prompt_tokens": 300, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 100}},
    )


# Named apart from its fixture so a test module can import it without its parameters redefining the import.
@pytest.fixture(name="fake_openai")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    try:
        yield server
    finally:
        server.close()
