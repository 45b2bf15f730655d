"""A tool-call round trip through the gateway (issue 38): the agent runs the tool the scripted model
asked for and sends the result back in its own API's shape; the Answer's next GatewayCall holds the
assistant's tool call and the result as OpenAI chat messages, linked by the call's id."""

from __future__ import annotations

import asyncio
from typing import Any

from agentcompass_dagster.gateway.calls import GatewayCall
from scripted_gateway import (
    ANTHROPIC_TOOLS,
    BASH_ARGS,
    CHAT_TOOLS,
    RESPONSES_TOOLS,
    Script,
    anthropic_client,
    openai_client,
    running_gateway,
    turn,
)

SCRIPT = [turn(None, ("bash", BASH_ARGS)), turn("two files")]
TOOL_OUTPUT = "a.txt\nb.txt"


def assert_round_trip(second: GatewayCall) -> None:
    assistant, result = second.messages[-2:]
    (call,) = assistant["tool_calls"]
    assert (assistant["role"], call["type"], call["function"]["name"]) == ("assistant", "function", "bash")
    assert call["function"]["arguments"].replace(" ", "") == BASH_ARGS.replace(" ", "")
    assert (result["role"], result["tool_call_id"]) == ("tool", call["id"])
    content = result["content"]
    assert TOOL_OUTPUT in (content if isinstance(content, str) else " ".join(p["text"] for p in content))


def test_chat_completions_tool_result_reaches_the_answer() -> None:
    """Issue 38: Chat Completions: the tool message the agent sends comes to the Answer as sent."""

    async def scenario() -> Script:
        script = Script(list(SCRIPT))
        async with running_gateway() as gateway:
            client = openai_client(gateway, gateway.admit(script))
            messages: list[Any] = [{"role": "user", "content": "count the files"}]
            first = await client.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
            message = first.choices[0].message
            (call,) = message.tool_calls or []
            messages += [
                message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": TOOL_OUTPUT},
            ]
            final = await client.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
            assert final.choices[0].message.content == "two files"
        return script

    assert_round_trip(asyncio.run(scenario()).calls[1])


def test_responses_function_call_output_reaches_the_answer() -> None:
    """Issue 38: Responses: the function_call item and its function_call_output come to the Answer as an
    assistant tool call and a tool message."""

    async def scenario() -> Script:
        script = Script(list(SCRIPT))
        async with running_gateway() as gateway:
            client = openai_client(gateway, gateway.admit(script))
            first = await client.responses.create(model="m", input="count the files", tools=RESPONSES_TOOLS)
            (call,) = [item for item in first.output if item.type == "function_call"]
            follow_up: Any = [
                {"role": "user", "content": "count the files"},
                {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
                {"type": "function_call_output", "call_id": call.call_id, "output": TOOL_OUTPUT},
            ]
            final = await client.responses.create(model="m", input=follow_up, tools=RESPONSES_TOOLS, stream=True)
            events = [event async for event in final]
            assert events[-1].response.output_text == "two files"
        return script

    assert_round_trip(asyncio.run(scenario()).calls[1])


def test_anthropic_tool_result_reaches_the_answer() -> None:
    """Issue 38: Anthropic Messages (streaming, as Claude Code calls it): the tool_use block and the
    tool_result block come to the Answer as an assistant tool call and a tool message."""

    async def scenario() -> Script:
        script = Script(list(SCRIPT))
        async with running_gateway() as gateway:
            client = anthropic_client(gateway, gateway.admit(script))
            messages: list[Any] = [{"role": "user", "content": "count the files"}]
            async with client.messages.stream(
                model="m", max_tokens=100, messages=messages, tools=ANTHROPIC_TOOLS
            ) as stream:
                first = await stream.get_final_message()
            (tool_use,) = [block for block in first.content if block.type == "tool_use"]
            messages += [
                {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": TOOL_OUTPUT}],
                },
            ]
            async with client.messages.stream(
                model="m", max_tokens=100, messages=messages, tools=ANTHROPIC_TOOLS
            ) as stream:
                final = await stream.get_final_message()
            assert [getattr(block, "text", None) for block in final.content] == ["two files"]
        return script

    assert_round_trip(asyncio.run(scenario()).calls[1])
