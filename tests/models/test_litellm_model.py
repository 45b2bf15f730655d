"""The litellm model (issue 38): LiteLLM's `openai/` provider against the tests' fake OpenAI server, and its
`anthropic/` provider against a fake Anthropic Messages server written here, through the real library."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, files_without, run_tool_agent_demo
from fake_openai import (  # noqa: F401
    COUNT_ERRORS,
    FakeOpenAI,
    fake_openai_server,
    solve_count_errors,
    tool_call,
)

from agentcompass_dagster.contracts.declarations import ModelConfig
from agentcompass_dagster.contracts.model import CALL_WATCH, CallContext, CallWatch, ContextOverflow, ModelError
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.plugins.models.litellm_model import LiteLLMModel
from agentcompass_dagster.plugins.models.usage import turn_usage
from agentcompass_dagster.declarations.registry import models

KEY_ENV = "AGENTCOMPASS_TEST_LITELLM_KEY"
KEY = "sk-canary-" + "c0ffee" * 6
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "count the errors"}]
BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}


class FakeAnthropic:
    """An Anthropic Messages endpoint on 127.0.0.1: ``POST /v1/messages`` answers the queued messages in
    order (500 once none is left) and records each request's path, lower-cased headers and body."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self._replies: deque[tuple[int, dict[str, Any]]] = deque()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"null")
                fake.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status, reply = (
                    fake._replies.popleft()
                    if fake._replies
                    else (500, {"type": "error", "error": {"type": "api_error", "message": "no reply queued"}})
                )
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def reply(self, *blocks: dict[str, Any], usage: dict[str, int], stop_reason: str = "tool_use") -> None:
        self._replies.append(
            (
                200,
                {
                    "id": f"msg_{len(self._replies)}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-x-20250101",
                    "content": list(blocks),
                    "stop_reason": stop_reason,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
        )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic()
    try:
        yield server
    finally:
        server.close()


def tool_use(name: str, arguments: dict[str, Any], use_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": arguments}


def make_model(model: str, base_url: str | None, api_key_env: str | None = None, **params: Any) -> LiteLLMModel:
    return LiteLLMModel(
        ModelConfig(
            id="lite", provider="litellm", model=model, base_url=base_url, api_key_env=api_key_env, params=params
        )
    )


def complete(model: LiteLLMModel, tools: list[dict[str, Any]] | None = None, watch: CallWatch | None = None) -> Any:
    """One call on an event loop of its own, as each orchestration has, under ``watch`` when given."""

    async def call() -> Any:
        CALL_WATCH.set(watch)
        return await model.complete(MESSAGES, tools or [], CallContext(task_id="t", turn=0))

    return asyncio.run(call())


def test_a_turn_with_tool_calls_usage_and_the_declared_price(fake_openai: FakeOpenAI) -> None:
    """R-DISP-4, issue 38: through LiteLLM's openai/ provider the tool calls come back with their raw
    argument text, usage reaches turn_usage (cached tokens counted once) and the declared price is the cost."""
    malformed = '{"command": "grep -c ERROR app.log'
    fake_openai.reply(
        content="Counting.",
        tool_calls=[tool_call("bash", malformed, "call_a")],
        usage={
            "prompt_tokens": 1000,
            "completion_tokens": 200,
            "total_tokens": 1200,
            "prompt_tokens_details": {"cached_tokens": 800},
            "completion_tokens_details": {"reasoning_tokens": 150},
        },
        model="served-2025",
    )
    model = make_model(
        "openai/served",
        fake_openai.base_url,
        temperature=0.0,
        max_tokens=64,
        price={"input": 1.0, "output": 2.0, "cache_read": 0.5},
    )
    turn = complete(model, [BASH])
    assert (turn.content, turn.stop_reason, turn.model_id) == ("Counting.", "tool_calls", "served-2025")
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("call_a", "bash", malformed)]
    assert [(t.status, t.error) for t in turn.tries] == [(200, None)] and turn.duration_s > 0
    usage = turn_usage(turn.usage, turn.cost_usd, model.price)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (
        1000,
        200,
        800,
        150,
    )
    assert turn.cost_usd == pytest.approx((200 * 1.0 + 800 * 0.5 + 200 * 2.0) / 1e6) == usage.cost_usd
    [(path, _, body)] = fake_openai.requests
    assert path == "/v1/chat/completions"
    assert (body["model"], body["messages"], body["tools"]) == ("served", MESSAGES, [BASH])
    assert (body["temperature"], body["max_tokens"]) == (0.0, 64)


def test_a_rate_limit_is_retried_by_us_alone(fake_openai: FakeOpenAI) -> None:
    """Issue 38: a 429 is retried once per our max_retries, each try recorded; the SDK under LiteLLM retries
    nothing itself (every request is its first try)."""
    fake_openai.push(429, {"error": {"message": "slow down", "type": "rate_limit"}})
    fake_openai.reply(content="done")
    turn = complete(make_model("openai/served", fake_openai.base_url, max_retries=2))
    assert turn.content == "done"
    assert [t.status for t in turn.tries] == [429, 200]
    assert [r.headers.get("x-stainless-retry-count", "0") for r in fake_openai.requests] == ["0", "0"]


def test_the_wait_before_a_retry_honours_retry_after_within_a_minute() -> None:
    """Issue 38: as the openai SDK waits: the provider's retry-after-ms or retry-after (seconds or an HTTP
    date) when it is positive and at most a minute, else 0.5 s doubling per retry up to 8 s, less a jitter."""
    from email.utils import formatdate

    from agentcompass_dagster.plugins.models.litellm_failures import Failure, _retry_after_s

    assert _retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert _retry_after_s({"retry-after": "3"}) == 3.0
    assert 25 < (_retry_after_s({"retry-after": formatdate(time.time() + 30, usegmt=True)}) or 0) <= 30
    assert _retry_after_s({}) is None and _retry_after_s({"retry-after": "soon"}) is None

    def failure(after: float | None) -> Failure:
        return Failure(status=429, error=None, problem="", transient=True, retry_after_s=after)

    assert failure(0.25).wait_s(3) == 0.25
    assert 0.375 <= failure(None).wait_s(0) <= 0.5 and 6 <= failure(600).wait_s(5) <= 8


def test_server_errors_are_retried_up_to_max_retries_and_say_so(fake_openai: FakeOpenAI) -> None:
    for _ in range(3):
        fake_openai.push(503, {"error": {"message": "overloaded"}})
    watch = CallWatch()
    with pytest.raises(ModelError) as caught:
        complete(make_model("openai/served", fake_openai.base_url, max_retries=1), watch=watch)
    assert caught.value.status == 503 and len(fake_openai.requests) == 2
    assert "overloaded (2 tries: max_retries=1)" in str(caught.value)
    assert [t.status for t in caught.value.tries] == [503, 503]
    assert not watch.answered, "a 5xx is the server failing, not an answer"


def test_a_rejected_key_is_not_retried_and_never_shown(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-STORE-4, issue 38: a 401 is one request, a ModelError with status 401 whose message does not carry
    the key the server echoed; the call was answered."""
    monkeypatch.setenv(KEY_ENV, KEY)
    fake_openai.push(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}})
    watch = CallWatch()
    with pytest.raises(ModelError) as caught:
        complete(make_model("openai/served", fake_openai.base_url, api_key_env=KEY_ENV), watch=watch)
    assert caught.value.status == 401 and not isinstance(caught.value, ContextOverflow)
    assert len(fake_openai.requests) == 1 and fake_openai.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in str(caught.value) and "HTTP 401" in str(caught.value) and "'lite'" in str(caught.value)
    assert watch.answered


def test_a_context_length_error_is_a_context_overflow(fake_openai: FakeOpenAI) -> None:
    """Issue 38: LiteLLM's ContextWindowExceededError is our ContextOverflow, which a harness compacts after."""
    message = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    fake_openai.push(400, {"error": {"message": message, "type": "invalid_request_error"}})
    with pytest.raises(ContextOverflow, match="HTTP 400.*maximum context length") as caught:
        complete(make_model("openai/served", fake_openai.base_url))
    assert caught.value.status == 400 and len(fake_openai.requests) == 1


def test_an_unreachable_endpoint_is_retried_then_a_model_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelError, match=f"127.0.0.1:{port}.*cannot connect") as caught:
        complete(make_model("openai/served", f"http://127.0.0.1:{port}/v1", max_retries=1))
    assert [(t.status, t.error) for t in caught.value.tries] == [(None, "ConnectError")] * 2


def test_with_a_base_url_and_no_api_key_env_the_hosts_key_is_not_sent(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: LiteLLM would send OPENAI_API_KEY to whatever endpoint the declaration names."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-must-not-be-sent")
    fake_openai.reply(content="ok")
    complete(make_model("openai/served", fake_openai.base_url))
    assert fake_openai.requests[0].headers["authorization"] == "Bearer no-key"


def test_an_anthropic_turn_comes_back_in_our_format(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-DISP-4, issue 38: through LiteLLM's anthropic/ provider a Messages response's tool_use block is a
    tool call with JSON argument text, its cache reads and writes count into the input once, and the key
    from api_key_env goes in x-api-key."""
    monkeypatch.setenv(KEY_ENV, KEY)
    fake_anthropic.reply(
        {"type": "text", "text": "Counting."},
        tool_use("bash", {"command": "ls"}, "toolu_1"),
        usage={
            "input_tokens": 100,
            "output_tokens": 20,
            "cache_read_input_tokens": 50,
            "cache_creation_input_tokens": 10,
        },
    )
    model = make_model("anthropic/claude-x", fake_anthropic.base_url, api_key_env=KEY_ENV, max_tokens=256)
    turn = complete(model, [BASH])
    assert (turn.content, turn.stop_reason, turn.model_id) == ("Counting.", "tool_calls", "claude-x-20250101")
    [call] = turn.tool_calls
    assert (call.id, call.name, call.parsed_arguments()) == ("toolu_1", "bash", {"command": "ls"})
    usage = turn_usage(turn.usage, turn.cost_usd, model.price)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        160,
        20,
        50,
        10,
    )
    assert turn.cost_usd is None, "LiteLLM's table does not know claude-x and no price is declared"
    [(path, headers, body)] = fake_anthropic.requests
    assert path == "/v1/messages" and headers["x-api-key"] == KEY and "authorization" not in headers
    assert body["model"] == "claude-x" and body["max_tokens"] == 256
    assert [tool["name"] for tool in body["tools"]] == ["bash"]
    assert "Be brief." in json.dumps(body["system"])


def test_litellms_price_table_prices_a_model_it_knows(fake_anthropic: FakeAnthropic) -> None:
    """R-DISP-4, issue 38: without a declared price the cost is LiteLLM's table's (claude-sonnet-4-5: USD 3
    and 15 per million input and output tokens, cache reads 0.3, cache writes 3.75)."""
    fake_anthropic.reply(
        {"type": "text", "text": "ok"},
        stop_reason="end_turn",
        usage={
            "input_tokens": 100,
            "output_tokens": 20,
            "cache_read_input_tokens": 50,
            "cache_creation_input_tokens": 10,
        },
    )
    turn = complete(make_model("anthropic/claude-sonnet-4-5", fake_anthropic.base_url, max_tokens=64))
    assert turn.cost_usd == pytest.approx((100 * 3.0 + 20 * 15.0 + 50 * 0.3 + 10 * 3.75) / 1e6)


def test_a_model_without_a_provider_prefix_is_refused_naming_the_file() -> None:
    """Issue 38: one line naming the declaration's file, the field and the value, with the near miss."""
    config = ModelConfig(id="lite", provider="litellm", model="claude-sonnet-4-5")
    config.read_from("resources/models/claude.yaml")
    with pytest.raises(UserError) as caught:
        LiteLLMModel(config)
    message = str(caught.value)
    assert message.startswith("resources/models/claude.yaml: model.model='claude-sonnet-4-5': ") and "\n" not in message
    with pytest.raises(UserError, match=r"model\.model='antropic/claude-x'.*did you mean 'anthropic/claude-x'\?"):
        make_model("antropic/claude-x", None)


def test_an_unset_key_variable_fails_the_call_not_the_build(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: the key is read when a call is made, so a process that only builds the model needs none;
    a call without it is one line naming the file, the field and the variable, and sends nothing."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = ModelConfig(
        id="lite", provider="litellm", model="openai/served", base_url=fake_openai.base_url, api_key_env=KEY_ENV
    )
    config.read_from("resources/models/lite.yaml")
    model = LiteLLMModel(config)
    with pytest.raises(
        UserError,
        match=f"^resources/models/lite.yaml: model.api_key_env='{KEY_ENV}': the environment "
        f"variable {KEY_ENV} is not set or empty$",
    ):
        complete(model)
    assert fake_openai.requests == []


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"aws_secret_access_key": "AKIA"}, r"model\.params\.extra\.aws_secret_access_key='\*\*\*': credentials"),
        ({"api_base": "http://elsewhere"}, r"model\.params\.extra\.api_base=.*set it in model\.base_url"),
        ({"num_retries": 5}, r"model\.params\.extra\.num_retries=5: set it in model\.params\.max_retries"),
    ],
)
def test_extra_arguments_may_not_carry_keys_or_override_the_declaration(extra: dict[str, Any], problem: str) -> None:
    with pytest.raises(UserError, match=problem) as caught:
        make_model("openai/served", None, extra=extra)
    assert "AKIA" not in str(caught.value)


def test_the_registry_names_the_provider_and_importing_it_does_not_import_litellm() -> None:
    assert models.get("litellm") is LiteLLMModel
    code = (
        "import sys, agentcompass_dagster.plugins.models.litellm_model, agentcompass_dagster.declarations.registry; "
        "sys.exit('litellm' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


def test_a_call_leaves_no_logging_task_of_litellms_on_the_loop(fake_openai: FakeOpenAI) -> None:
    """Issue 38: LiteLLM's success callbacks and its logging worker are off for our calls, so an attempt's
    event loop is left with no task of theirs (nor are they carried into the next attempt's loop)."""
    fake_openai.reply(content="ok")
    model = make_model("openai/served", fake_openai.base_url)

    async def call() -> list[str]:
        await model.complete(MESSAGES, [], CallContext())
        await asyncio.sleep(0)  # a task LiteLLM spawned at the end of the call has started
        return [task.get_coro().__qualname__ for task in asyncio.all_tasks() if task is not asyncio.current_task()]

    left = asyncio.run(call())
    # Its HTTP client's service hook still runs a moment: it calls the service callbacks, and none is registered.
    assert not [name for name in left if "Logging" in name and "ServiceLogging" not in name], left


PRINTS = """
import asyncio, sys
from agentcompass_dagster.contracts.declarations import ModelConfig
from agentcompass_dagster.contracts.model import CallContext, ModelError
from agentcompass_dagster.plugins.models.litellm_model import LiteLLMModel
model = LiteLLMModel(ModelConfig(id="lite", provider="litellm", model="openai/served", base_url=sys.argv[1],
                                 api_key_env="AGENTCOMPASS_TEST_LITELLM_KEY", params={"max_retries": 0}))
for _ in range(2):
    try:
        asyncio.run(model.complete([{"role": "user", "content": "hi"}], [], CallContext()))
    except ModelError as exc:
        print(exc.status)
"""


def test_litellm_prints_nothing_even_when_asked_to_debug(fake_openai: FakeOpenAI) -> None:
    """R-STORE-4, issue 38: with LITELLM_LOG=DEBUG in the host's environment, a call and a 401 that echoes
    the key print neither the key nor LiteLLM's banners, only what the caller prints itself."""
    import os

    fake_openai.reply(content="ok")
    fake_openai.push(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    env = {**os.environ, KEY_ENV: KEY, "LITELLM_LOG": "DEBUG"}
    done = subprocess.run(
        [sys.executable, "-c", PRINTS, fake_openai.base_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "401\n", "")
    assert [r.headers["authorization"] for r in fake_openai.requests] == [f"Bearer {KEY}"] * 2


def test_a_sweep_scores_a_demo_task_through_litellm_against_an_openai_endpoint(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-DISP-4, R-STORE-4, issue 38: tool_agent in the local environment with provider litellm (openai/)
    solves count-errors: the tool calls run, the task is scored correct, usage and the declared price's
    cost reach the detail, a 429 is retried within the model call, and the key is sent but written nowhere."""
    monkeypatch.setenv(KEY_ENV, KEY)
    solve_count_errors(fake_openai)
    model = {
        "id": "lite",
        "provider": "litellm",
        "model": "openai/served-model",
        "base_url": fake_openai.base_url,
        "api_key_env": KEY_ENV,
        "params": {"price": {"input": 2.0, "output": 8.0, "cache_read": 0.5}},
    }
    detail = run_tool_agent_demo(tmp_path, model)
    attempt = detail["attempts"]["1"]
    assert detail["correct"] and attempt["final_answer"] == "5"
    calls = [step for step in attempt["trajectory"] if step["type"] == "model_call"]
    assert [[t["status"] for t in step["tries"]] for step in calls] == [[429, 200], [200]]
    assert fake_openai.requests[-1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_bash",
        "content": "exit code: 0\n5\n",
    }
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake_openai.requests)
    assert attempt["usage"]["input_tokens"] == 500 and attempt["usage"]["cache_read_tokens"] == 100
    assert attempt["usage"]["cost_usd"] == pytest.approx((400 * 2.0 + 100 * 0.5 + 30 * 8.0) / 1e6)
    files_without(tmp_path, KEY)


def test_a_sweep_through_an_anthropic_endpoint_keeps_the_key_off_disk(
    fake_anthropic: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-STORE-4, issue 38: the same task through LiteLLM's anthropic/ provider: scored correct, the tool
    result sent back as Anthropic's tool_result, the canary key in every request's x-api-key and in no file
    the run wrote."""
    monkeypatch.setenv(KEY_ENV, KEY)
    fake_anthropic.reply(
        tool_use("bash", {"command": COUNT_ERRORS}, "toolu_1"), usage={"input_tokens": 200, "output_tokens": 20}
    )
    fake_anthropic.reply(
        tool_use("submit", {"answer": "5"}, "toolu_2"), usage={"input_tokens": 300, "output_tokens": 10}
    )
    model = {
        "id": "claude",
        "provider": "litellm",
        "model": "anthropic/claude-x",
        "base_url": fake_anthropic.base_url,
        "api_key_env": KEY_ENV,
        "params": {"max_tokens": 512, "price": {"input": 3.0, "output": 15.0}},
    }
    detail = run_tool_agent_demo(tmp_path, model)
    attempt = detail["attempts"]["1"]
    assert detail["correct"] and attempt["final_answer"] == "5"
    assert attempt["usage"]["cost_usd"] == pytest.approx((500 * 3.0 + 30 * 15.0) / 1e6)
    assert all(headers["x-api-key"] == KEY for _, headers, _ in fake_anthropic.requests)
    last = fake_anthropic.requests[-1][2]["messages"][-1]
    assert last["role"] == "user" and last["content"][0]["type"] == "tool_result"
    assert last["content"][0]["tool_use_id"] == "toolu_1"
    files_without(tmp_path, KEY)


def test_the_shipped_example_builds_without_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: resources/models/claude-sonnet.yaml is a valid litellm declaration, and building it (as a
    process that only loads the sweep does) needs no key."""
    import yaml

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    path = REPO / "resources" / "models" / "claude-sonnet.yaml"
    config = ModelConfig.model_validate(yaml.safe_load(path.read_text()))
    model = models.get(config.provider)(config)
    assert isinstance(model, LiteLLMModel) and model.provider == "anthropic" and model.price is not None


def test_worker_threads_share_one_model(fake_anthropic: FakeAnthropic) -> None:
    """Each orchestration has its event loop in a thread of its own; LiteLLM's cached HTTP sessions must
    not leak from one loop into another."""
    from concurrent.futures import ThreadPoolExecutor

    for _ in range(8):
        fake_anthropic.reply(
            {"type": "text", "text": "ok"}, usage={"input_tokens": 1, "output_tokens": 1}, stop_reason="end_turn"
        )
    model = make_model("anthropic/claude-x", fake_anthropic.base_url, max_retries=0, max_tokens=16)
    with ThreadPoolExecutor(max_workers=4) as pool:
        turns = list(pool.map(lambda _: complete(model), range(8)))
    assert [t.content for t in turns] == ["ok"] * 8 and len(fake_anthropic.requests) == 8
