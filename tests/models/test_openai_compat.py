"""The openai_compat model against a local OpenAI-compatible server, through the real `openai` SDK."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fake_openai import (  # noqa: F401
    FAST_RETRY,
    FakeOpenAI,
    completion,
    fake_openai_server,
    solve_count_errors,
    tool_call,
)

from agentcompass_dagster.contracts.declarations import ModelConfig
from agentcompass_dagster.contracts.model import CallContext, ContextOverflow, ModelError
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.plugins.models.openai_compat import PLACEHOLDER_KEY, OpenAICompatModel
from agentcompass_dagster.plugins.models.usage import turn_usage
from agentcompass_dagster.declarations.registry import models

KEY_ENV = "AGENTCOMPASS_TEST_OPENAI_KEY"
KEY = "sk-test-0123456789abcdef"
MESSAGES = [{"role": "user", "content": "count the errors"}]
BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}


def make_model(
    server: FakeOpenAI | None,
    api_key_env: str | None = None,
    model: str | None = "served-model",
    base_url: str | None = None,
    **params: Any,
) -> OpenAICompatModel:
    """A model with fast SDK retries unless the test sets max_retries."""
    params.setdefault("max_retries", 2)
    url = base_url or (server.base_url if server is not None else None)
    return OpenAICompatModel(
        ModelConfig(
            id="compat", provider="openai_compat", model=model, base_url=url, api_key_env=api_key_env, params=params
        )
    )


def complete(model: OpenAICompatModel, tools: list[dict[str, Any]] | None = None) -> Any:
    """One call on an event loop of its own, as each orchestration has (a model serves several loops)."""
    return asyncio.run(model.complete(MESSAGES, tools or [], CallContext(task_id="t", turn=0)))


def test_a_text_turn(fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(content="There are 3 errors.", model="served-model-2024")
    turn = complete(make_model(fake_openai))
    assert turn.content == "There are 3 errors."
    assert turn.tool_calls == []
    assert turn.stop_reason == "stop"
    assert turn.model_id == "served-model-2024"
    assert turn.duration_s > 0
    path, _, body = fake_openai.requests[0]
    assert path == "/v1/chat/completions"
    # Unset options are left out, not sent as null, which some servers reject.
    assert body == {"model": "served-model", "messages": MESSAGES}


def test_options_and_tools_reach_the_request(fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(content="ok")
    complete(make_model(fake_openai, temperature=0.0, max_tokens=64, extra_body={"top_k": 20}), tools=[BASH])
    body = fake_openai.requests[0].body
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 64
    assert body["top_k"] == 20
    assert body["tools"] == [BASH]


def test_a_rate_limit_is_retried_by_the_sdk(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(429, {"error": {"message": "slow down", "type": "rate_limit"}})
    fake_openai.reply(content="done")
    turn = complete(make_model(fake_openai))
    assert turn.content == "done"
    assert len(fake_openai.requests) == 2
    assert [r.headers["x-stainless-retry-count"] for r in fake_openai.requests] == ["0", "1"]


def test_each_try_of_a_call_is_reported_with_its_status_or_error_and_duration(fake_openai: FakeOpenAI) -> None:
    """The SDK's retries are visible: a call that timed out once, then got a 503, then an answer, reports
    three tries (no response: ReadTimeout, 503, 200) with their durations, and a call that fails after its
    retries carries its tries on the error (a timed-out try and its retry were one "completed" call)."""
    fake_openai.push(200, completion(content="late"), delay_s=3.0)
    fake_openai.push(503, {"error": {"message": "overloaded"}}, headers=FAST_RETRY)
    fake_openai.reply(content="done")
    turn = complete(make_model(fake_openai, timeout_s=1.0))
    assert [(t.status, t.error) for t in turn.tries] == [(None, "ReadTimeout"), (503, None), (200, None)]
    assert turn.tries[0].duration_s >= 1.0 and turn.duration_s >= sum(t.duration_s for t in turn.tries)
    for _ in range(2):
        fake_openai.push(503, {"error": {"message": "overloaded"}}, headers=FAST_RETRY)
    with pytest.raises(ModelError) as caught:
        complete(make_model(fake_openai, max_retries=1))
    assert [t.status for t in caught.value.tries] == [503, 503]


def test_a_server_error_after_the_retries_says_how_often_it_was_tried(fake_openai: FakeOpenAI) -> None:
    for _ in range(2):
        fake_openai.push(503, {"error": {"message": "overloaded"}})
    with pytest.raises(ModelError) as caught:
        complete(make_model(fake_openai, max_retries=1))
    assert len(fake_openai.requests) == 2
    assert caught.value.status == 503
    # The message says the SDK already tried twice, so a timeout-like figure is not mistaken for one try.
    assert "overloaded (2 tries: max_retries=1)" in str(caught.value)


def test_a_rejected_key_is_not_retried_and_never_shown(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    fake_openai.push(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}})
    model = make_model(fake_openai, api_key_env=KEY_ENV)
    with pytest.raises(ModelError) as caught:
        complete(model)
    error = caught.value
    assert len(fake_openai.requests) == 1
    assert error.status == 401 and "tries" not in str(error)
    message = str(error)
    assert KEY not in message
    assert "'compat'" in message and fake_openai.base_url in message and "HTTP 401" in message


@pytest.mark.parametrize("status", [400, 403, 404])
def test_client_errors_are_not_retried(fake_openai: FakeOpenAI, status: int) -> None:
    fake_openai.push(status, {"error": {"message": "no"}})
    with pytest.raises(ModelError) as caught:
        complete(make_model(fake_openai))
    assert caught.value.status == status and not isinstance(caught.value, ContextOverflow)
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize(
    "message",
    [
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        "the request exceeds the available context size, try increasing it",
        "prompt is too long: 210000 tokens > 200000 maximum",
    ],
)
def test_a_context_overflow_is_its_own_error(fake_openai: FakeOpenAI, message: str) -> None:
    """How OpenAI, llama.cpp and Anthropic-style proxies word it: a harness can compact and try again."""
    fake_openai.push(400, {"error": {"message": message, "type": "invalid_request_error"}})
    with pytest.raises(ContextOverflow, match="HTTP 400"):
        complete(make_model(fake_openai))
    assert len(fake_openai.requests) == 1


def test_an_error_body_that_is_not_json_is_shown(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(404, "model 'served-model' not found")
    with pytest.raises(ModelError, match="HTTP 404: model 'served-model' not found"):
        complete(make_model(fake_openai))


def test_a_success_body_that_is_not_json_is_a_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(200, "<html>proxy login</html>")
    with pytest.raises(ModelError, match="unusable response"):
        complete(make_model(fake_openai))


def test_a_response_without_choices_is_a_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(200, {"error": {"message": "upstream failed"}})
    with pytest.raises(ModelError, match="no choices.*upstream failed"):
        complete(make_model(fake_openai))


def test_tool_call_arguments_come_back_verbatim(fake_openai: FakeOpenAI) -> None:
    malformed = '{"command": "grep -c ERROR log.txt'
    valid = '{"answer":  "3"}'
    fake_openai.reply(tool_calls=[tool_call("bash", malformed, "call_a"), tool_call("submit", valid, "call_b")])
    turn = complete(make_model(fake_openai), tools=[BASH])
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_a", "bash", malformed),
        ("call_b", "submit", valid),
    ]
    assert turn.stop_reason == "tool_calls"
    assert turn.assistant_message()["tool_calls"][0]["function"]["arguments"] == malformed


def test_tool_calls_without_id_or_with_object_arguments_are_normalised(fake_openai: FakeOpenAI) -> None:
    fake_openai.reply(tool_calls=[{"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}])
    [call] = complete(make_model(fake_openai)).tool_calls
    assert (call.id, call.name, call.arguments) == ("call_0_0", "bash", '{"command": "ls"}')


def test_the_key_comes_from_the_named_variable(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-must-not-be-sent")
    fake_openai.reply(content="ok")
    complete(make_model(fake_openai, api_key_env=KEY_ENV))
    assert fake_openai.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_without_api_key_env_a_placeholder_is_sent(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-must-not-be-sent")
    fake_openai.reply(content="ok")
    complete(make_model(fake_openai))
    assert fake_openai.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


@pytest.mark.parametrize("value", [None, "", "  "])
def test_a_missing_key_variable_fails_at_construction(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(KEY_ENV, value)
    with pytest.raises(UserError, match=f"model.api_key_env='{KEY_ENV}'.*{KEY_ENV} is not set or empty"):
        make_model(None, api_key_env=KEY_ENV, base_url="http://127.0.0.1:9/v1")


def test_a_key_in_the_declaration_is_refused() -> None:
    with pytest.raises(UserError, match="model.params.api_key.*api_key_env") as caught:
        make_model(None, base_url="http://127.0.0.1:9/v1", api_key=KEY)
    assert KEY not in str(caught.value)


def test_credentials_in_the_base_url_are_refused(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """R-STORE-4: a base_url with user:password@ (which the SDK would send as a Basic header in place of
    the key) is refused when the model is built: one line naming model.base_url with the password shown as
    ***, exit 2 from the CLI, and the password in no output and no file the run left."""
    from conftest import run_cli, write_sweep

    with pytest.raises(UserError, match=r"model\.base_url='https://bob:\*\*\*@host/v1'") as caught:
        make_model(None, base_url="https://bob:hunter2@host/v1")
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(UserError, match=r"model\.base_url='https://\*\*\*@host/v1'"):
        make_model(None, base_url="https://ghp_token@host/v1")

    model = {"id": "m", "provider": "openai_compat", "model": "served", "base_url": "https://bob:hunter2@host/v1"}
    sweep = write_sweep(
        tmp_path, benchmarks=[{"id": "demo", "tasks": ["count-errors"]}], models=[model], harness="tool_agent"
    )
    assert run_cli("run", sweep, "--direct") == 2
    out, err = capsys.readouterr()
    assert "hunter2" not in out + err
    [line] = err.splitlines()
    assert "model.base_url='https://bob:***@host/v1'" in line
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != sweep:
            assert b"hunter2" not in path.read_bytes(), path


def test_the_served_model_name_is_required() -> None:
    with pytest.raises(UserError, match="model.model=None"):
        make_model(None, model=None, base_url="http://127.0.0.1:9/v1")


def test_unknown_params_are_refused() -> None:
    with pytest.raises(UserError, match=r"^model\.params\.temprature=0\.2: not a field here"):
        make_model(None, base_url="http://127.0.0.1:9/v1", temprature=0.2)


def test_a_slow_server_times_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.push(200, completion(content="too late"), delay_s=10)
    started = time.monotonic()
    with pytest.raises(ModelError, match="no response within timeout_s=0.3") as caught:
        complete(make_model(fake_openai, timeout_s=0.3, max_retries=0))
    assert time.monotonic() - started < 10, "the call waited for the reply instead of timing out"
    assert "tries" not in str(caught.value)
    assert len(fake_openai.requests) == 1


def test_an_unreachable_server_is_a_model_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelError, match="cannot connect") as caught:
        complete(make_model(None, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0))
    assert f"127.0.0.1:{port}" in str(caught.value)


OPENAI_USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 200,
    "total_tokens": 1200,
    "prompt_tokens_details": {"cached_tokens": 800, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 150},
}


def test_usage_details_are_flattened(fake_openai: FakeOpenAI) -> None:
    """R-DISP-4: cached and reasoning tokens reach turn_usage under keys it reads."""
    fake_openai.reply(content="ok", usage=OPENAI_USAGE)
    turn = complete(make_model(fake_openai))
    assert turn.usage == {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
        "cached_tokens": 800,
        "reasoning_tokens": 150,
    }
    assert turn.cost_usd is None
    usage = turn_usage(turn.usage, turn.cost_usd)
    assert (usage.output_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (200, 800, 150)
    assert usage.cost_usd is None


def test_input_tokens_include_the_cache_once(fake_openai: FakeOpenAI) -> None:
    """R-DISP-4: input includes cache reads; OpenAI's prompt_tokens already count them."""
    fake_openai.reply(content="ok", usage=OPENAI_USAGE)
    model = make_model(fake_openai, price={"input": 1.0, "output": 2.0, "cache_read": 0.5})
    turn = complete(model)
    usage = turn_usage(turn.usage, turn.cost_usd, model.price)
    assert usage.input_tokens == 1000
    assert usage.cost_usd == pytest.approx((200 * 1.0 + 800 * 0.5 + 200 * 2.0) / 1e6)


def test_the_price_table_prices_a_turn_without_provider_cost(fake_openai: FakeOpenAI) -> None:
    """R-DISP-4: with no cost from the provider, the declared price table gives it."""
    fake_openai.reply(content="ok", usage={"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500})
    model = make_model(fake_openai, price={"input": 1.0, "output": 2.0})
    turn = complete(model)
    assert turn.cost_usd is None
    usage = turn_usage(turn.usage, turn.cost_usd, model.price)
    assert (usage.input_tokens, usage.output_tokens) == (1000, 500)
    assert usage.cost_usd == pytest.approx(0.002)


def test_a_provider_cost_wins_over_the_price_table(fake_openai: FakeOpenAI) -> None:
    """R-DISP-4: a cost the provider reports (OpenRouter's usage.cost) is the turn's cost."""
    fake_openai.reply(
        content="ok",
        usage={
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "cost": 0.0123,
            "cost_details": {"upstream_inference_cost": 0.01},
        },
    )
    model = make_model(fake_openai, price={"input": 1.0, "output": 2.0})
    turn = complete(model)
    assert turn.cost_usd == pytest.approx(0.0123)
    assert "cost_details" not in turn.usage
    assert turn_usage(turn.usage, turn.cost_usd, model.price).cost_usd == pytest.approx(0.0123)


def test_the_registry_names_the_provider() -> None:
    assert models.get("openai_compat") is OpenAICompatModel


def test_importing_the_plugin_does_not_import_the_sdk() -> None:
    code = (
        "import sys, agentcompass_dagster.plugins.models.openai_compat, agentcompass_dagster.declarations.registry; "
        "sys.exit('openai' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


def test_worker_threads_share_one_model(fake_openai: FakeOpenAI) -> None:
    model = make_model(fake_openai)
    for _ in range(8):
        fake_openai.reply(content="ok")
    with ThreadPoolExecutor(max_workers=4) as pool:
        turns = list(pool.map(lambda _: complete(model), range(8)))
    assert [t.content for t in turns] == ["ok"] * 8
    assert len(fake_openai.requests) == 8


def test_tool_agent_solves_a_demo_task_through_the_sdk_and_keeps_the_key_off_disk(
    fake_openai: FakeOpenAI, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool_agent harness against a real HTTP endpoint through the openai SDK: a 429 is retried (the
    trajectory's model call lists both tries), the tool calls run in the environment, the conversation the
    server receives carries the tool results, usage and price-table cost reach the detail, and the API key is
    sent but never written anywhere."""
    from conftest import files_without, run_tool_agent_demo

    key = "sk-" + "k" * 40
    monkeypatch.setenv("FAKE_OPENAI_KEY", key)
    solve_count_errors(fake_openai)
    model = {
        "id": "served",
        "provider": "openai_compat",
        "model": "served-model",
        "base_url": fake_openai.base_url,
        "api_key_env": "FAKE_OPENAI_KEY",
        "params": {"price": {"input": 2.0, "output": 8.0, "cache_read": 0.5}},
    }
    detail = run_tool_agent_demo(tmp_path, model)
    attempt = detail["attempts"]["1"]
    assert detail["correct"] and attempt["final_answer"] == "5"
    assert len(fake_openai.requests) == 3  # the 429, its retry, and the second turn
    calls = [step for step in attempt["trajectory"] if step["type"] == "model_call"]
    assert [[t["status"] for t in step["tries"]] for step in calls] == [[429, 200], [200]]
    assert all(r.headers["authorization"] == f"Bearer {key}" for r in fake_openai.requests)
    second = fake_openai.requests[-1].body["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "call_bash", "content": "exit code: 0\n5\n"}
    assert attempt["usage"]["input_tokens"] == 500 and attempt["usage"]["cache_read_tokens"] == 100
    assert attempt["usage"]["cost_usd"] == pytest.approx((400 * 2.0 + 100 * 0.5 + 30 * 8.0) / 1e6)
    files_without(tmp_path, key)
