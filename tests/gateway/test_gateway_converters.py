"""The gateway's own converters (issue 38) where they go beyond LiteLLM's or differ from them on purpose:
no LiteLLM in a gateway's process, the event sequences the SDKs parse, what no OpenAI chat model can be
given (skipped, with a log line) and what the gateway refuses."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from agentcompass_dagster.gateway.translate import read_request
from agentcompass_dagster.gateway.wire import RequestRefused
from request_corpus import PNG
from scripted_gateway import BASH_ARGS, RESPONSES_TOOLS, Script, anthropic_client, openai_client, running_gateway, turn

TESTS = Path(__file__).parents[1]
ONE_CALL_EACH = """
import asyncio, sys
from scripted_gateway import Script, anthropic_client, openai_client, running_gateway, turn
async def main():
    async with running_gateway() as gateway:
        token = gateway.admit(Script([turn("hi")]))
        user = [{"role": "user", "content": "x"}]
        await openai_client(gateway, token).chat.completions.create(model="m", messages=user, stream=True)
        await openai_client(gateway, token).responses.create(model="m", input="x")
        await anthropic_client(gateway, token).messages.create(model="m", max_tokens=5, messages=user)
asyncio.run(main())
print(sorted(name for name in sys.modules if name.split(".")[0] == "litellm"))
"""


def test_a_gateway_process_never_imports_litellm() -> None:
    """Issue 38: a process that starts a gateway and makes one call of each API family has not imported
    LiteLLM (its import cost each run process ~165 MB and 2.5 s, over the issue's 50 MB per run)."""
    done = subprocess.run(
        [sys.executable, "-c", ONE_CALL_EACH],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(TESTS), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_stream_events_come_in_the_order_the_sdks_parse() -> None:
    """Issue 38: a streamed Responses turn of text and a tool call is created, its items added, filled and
    done, then completed; a streamed Message starts, its blocks start, get their delta and stop, then the
    stop reason and the usage come in message_delta before message_stop."""

    async def scenario() -> tuple[list[str], list[Any]]:
        script = Script([turn("on it", ("bash", BASH_ARGS), prompt=20, completion=4)])
        async with running_gateway() as gateway:
            token = gateway.admit(script)
            stream = await openai_client(gateway, token).responses.create(
                model="m", input="x", tools=RESPONSES_TOOLS, stream=True
            )
            responses = [event.type async for event in stream]
            raw = await anthropic_client(gateway, token).messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}], stream=True
            )
            return responses, [event async for event in raw]

    responses, anthropic_events = asyncio.run(scenario())
    item = ["response.output_item.added", "response.output_item.done"]
    assert responses == [
        "response.created",
        "response.in_progress",
        item[0],
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        item[1],
        item[0],
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        item[1],
        "response.completed",
    ]
    block = ["content_block_start", "content_block_delta", "content_block_stop"]
    assert [e.type for e in anthropic_events] == ["message_start", *block, *block, "message_delta", "message_stop"]
    delta = anthropic_events[-2]
    assert (delta.delta.stop_reason, delta.usage.output_tokens, delta.usage.input_tokens) == ("tool_use", 4, 20)


def test_what_no_chat_model_can_be_given_is_skipped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 38: Anthropic server tools and Responses hosted tools are skipped with a log line naming them;
    an image in an Anthropic tool result goes into a user message after the tool message (OpenAI tool
    messages hold text only); a system reminder between a tool call and its result moves after the result."""
    anthropic_body = {
        "model": "m",
        "max_tokens": 5,
        "tools": [
            {"name": "bash", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
        "messages": [
            {"role": "user", "content": "shot"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "system", "content": "reminder"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "see"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                        ],
                    }
                ],
            },
        ],
    }
    responses_body = {"model": "m", "input": "x", "tools": [{"type": "web_search"}, {"type": "local_shell"}]}
    with caplog.at_level(logging.INFO, logger="agentcompass_dagster.gateway"):
        anthropic_call = read_request("anthropic_messages", json.dumps(anthropic_body).encode()).call
        responses_call = read_request("responses", json.dumps(responses_body).encode()).call
    assert [t["function"]["name"] for t in anthropic_call.tools] == ["bash"] and responses_call.tools == []
    assert [m["role"] for m in anthropic_call.messages] == ["user", "assistant", "tool", "system", "user"]
    assert anthropic_call.messages[2] == {"role": "tool", "tool_call_id": "t1", "content": "see"}
    assert anthropic_call.messages[4]["content"] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    ]
    assert [r.getMessage() for r in caplog.records] == [
        "model gateway: skipped Anthropic server tools (no input_schema): web_search_20250305",
        "model gateway: skipped Responses tools other than function: local_shell, web_search",
    ]


@pytest.mark.parametrize(
    ("api", "body", "message"),
    [
        ("chat_completions", {"model": "m", "messages": [], "functions": [{"name": "f"}]}, "legacy functions"),
        (
            "chat_completions",
            {"model": "m", "messages": [{"role": "function", "name": "f", "content": "1"}]},
            "role 'function'",
        ),
        ("responses", {"model": "m", "input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ("responses", {"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}, "item_reference"),
        ("responses", {"model": "m"}, "input: Field required"),
        ("anthropic_messages", {"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
    ],
)
def test_requests_the_gateway_cannot_answer_are_refused(api: Any, body: dict[str, Any], message: str) -> None:
    """Issue 38: what the converters cannot answer faithfully is a 400 naming the reason: legacy
    function calling, a Responses conversation stored elsewhere, a body that is not its family's request."""
    with pytest.raises(RequestRefused, match=message):
        read_request(api, json.dumps(body).encode())


def test_legacy_functions_are_a_bad_request_for_the_sdk() -> None:
    """Issue 38: the openai SDK gets the refusal of legacy ``functions`` as BadRequestError (not retried)."""

    async def scenario() -> None:
        script = Script([turn("hi")])
        async with running_gateway() as gateway:
            client = openai_client(gateway, gateway.admit(script))
            with pytest.raises(openai.BadRequestError, match="legacy functions"):
                await client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "x"}],
                    functions=[{"name": "f", "parameters": {"type": "object"}}],
                )
        assert script.calls == []

    asyncio.run(scenario())
