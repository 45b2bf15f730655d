"""The model gateway (issue 38) driven by the real openai and anthropic SDKs over its unix socket: each of
the three API families, streaming and not, parses into the SDK's objects with the scripted turn's text,
tool calls, usage and stop reason, and a tool result the agent sends back reaches the Answer as an
OpenAI tool message."""

from __future__ import annotations

import asyncio
import json
from typing import Any

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


def test_chat_completions_stream_and_not() -> None:
    """Issue 38: Chat Completions, plain and ``stream: true``: the SDK reads the text, the tool call's
    name and arguments, the usage and ``finish_reason: tool_calls``; the Answer gets the request's
    messages, tools and parameters and whether it streams."""

    async def scenario() -> None:
        script = Script([turn("looking", ("bash", BASH_ARGS), prompt=31, completion=9)])
        async with running_gateway() as gateway:
            client = openai_client(gateway, gateway.admit(script))
            messages: Any = [{"role": "user", "content": "list the files"}]
            plain = await client.chat.completions.create(
                model="gpt-x", messages=messages, tools=CHAT_TOOLS, temperature=0.5
            )
            choice = plain.choices[0]
            assert (choice.message.content, choice.finish_reason) == ("looking", "tool_calls")
            (call,) = choice.message.tool_calls or []
            assert (call.function.name, json.loads(call.function.arguments)) == ("bash", {"command": "ls -l"})
            assert plain.usage and (plain.usage.prompt_tokens, plain.usage.completion_tokens) == (31, 9)

            stream = await client.chat.completions.create(
                model="gpt-x", messages=messages, tools=CHAT_TOOLS, stream=True
            )
            chunks = [chunk async for chunk in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        usage = [c.usage for c in chunks if c.usage]
        assert (text, finish) == ("looking", ["tool_calls"])
        assert [(t.function.name, t.function.arguments) for t in calls if t.function] == [("bash", BASH_ARGS)]
        assert [(u.prompt_tokens, u.completion_tokens) for u in usage] == [(31, 9)]
        first, second = script.calls
        assert first.messages == messages and first.tools == CHAT_TOOLS
        assert (first.api, first.stream, first.params, first.requested_model) == (
            "chat_completions",
            False,
            {"temperature": 0.5},
            "gpt-x",
        )
        assert second.stream is True

    asyncio.run(scenario())


def test_responses_stream_and_not() -> None:
    """Issue 38: the Responses API, plain and streaming: ``output_text``, the function_call item, the usage
    and a completed status, and in the stream the text deltas, the arguments and ``response.completed``
    carrying the whole response; the Answer gets the input as chat messages (instructions as the system
    message) and the tools as OpenAI function tools."""

    async def scenario() -> None:
        script = Script([turn("checking", ("bash", BASH_ARGS), prompt=40, completion=12)])
        async with running_gateway() as gateway:
            client = openai_client(gateway, gateway.admit(script))
            plain = await client.responses.create(
                model="gpt-x",
                instructions="be brief",
                input="list the files",
                tools=RESPONSES_TOOLS,
                max_output_tokens=300,
            )
            stream = await client.responses.create(
                model="gpt-x", input="list the files", tools=RESPONSES_TOOLS, stream=True
            )
            events = [event async for event in stream]
        assert (plain.output_text, plain.status) == ("checking", "completed")
        (call,) = [item for item in plain.output if item.type == "function_call"]
        assert (call.name, json.loads(call.arguments)) == ("bash", {"command": "ls -l"})
        assert plain.usage and (plain.usage.input_tokens, plain.usage.output_tokens) == (40, 12)
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        (arguments,) = [e.arguments for e in events if e.type == "response.function_call_arguments.done"]
        completed = events[-1]
        assert (deltas, json.loads(arguments), completed.type) == (
            "checking",
            {"command": "ls -l"},
            "response.completed",
        )
        assert completed.response.usage and completed.response.usage.output_tokens == 12
        first = script.calls[0]
        assert first.messages == [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "list the files"},
        ]
        assert [t["function"]["name"] for t in first.tools] == ["bash"]
        assert first.params["max_tokens"] == 300 and script.calls[1].stream is True

    asyncio.run(scenario())


def test_anthropic_messages_create_and_stream() -> None:
    """Issue 38: Anthropic Messages through ``messages.create`` and ``messages.stream``: a text block and a
    tool_use block with the parsed input, ``stop_reason: tool_use`` and the usage; the Answer gets the
    system prompt as the system message and the tools as OpenAI function tools."""

    async def scenario() -> None:
        script = Script([turn("on it", ("bash", BASH_ARGS), prompt=50, completion=5)])
        async with running_gateway() as gateway:
            client = anthropic_client(gateway, gateway.admit(script))
            messages: Any = [{"role": "user", "content": "list the files"}]
            plain = await client.messages.create(
                model="claude-x", max_tokens=200, system="be brief", messages=messages, tools=ANTHROPIC_TOOLS
            )
            async with client.messages.stream(
                model="claude-x", max_tokens=200, messages=messages, tools=ANTHROPIC_TOOLS
            ) as stream:
                texts = [text async for text in stream.text_stream]
                streamed = await stream.get_final_message()
        for message in (plain, streamed):
            text, tool = message.content
            assert (text.type, getattr(text, "text", None)) == ("text", "on it")
            assert (tool.type, getattr(tool, "name", None), getattr(tool, "input", None)) == (
                "tool_use",
                "bash",
                {"command": "ls -l"},
            )
            assert message.stop_reason == "tool_use"
            assert (message.usage.input_tokens, message.usage.output_tokens) == (50, 5)
        assert "".join(texts) == "on it"
        first = script.calls[0]
        assert first.messages == [{"role": "system", "content": "be brief"}, *messages]
        assert first.tools == [
            {
                "type": "function",
                "function": {
                    "name": "bash",
                    "description": "run a command",
                    "parameters": CHAT_TOOLS[0]["function"]["parameters"],
                },
            }
        ]
        assert (first.api, first.params["max_tokens"], script.calls[1].stream) == ("anthropic_messages", 200, True)

    asyncio.run(scenario())


def test_a_turn_cut_by_its_token_allowance_says_so_in_each_family() -> None:
    """Issue 38: a turn that stopped on the model's output allowance reads as ``finish_reason: length``,
    ``stop_reason: max_tokens`` and an incomplete Responses status, whose stream ends with
    response.incomplete (the agent can tell a cut answer)."""

    async def scenario() -> None:
        script = Script([turn("half an ans", stop="length")])
        async with running_gateway() as gateway:
            token = gateway.admit(script)
            chat = await openai_client(gateway, token).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
            response = await openai_client(gateway, token).responses.create(model="m", input="x")
            stream = await openai_client(gateway, token).responses.create(model="m", input="x", stream=True)
            last = [event async for event in stream][-1]
            message = await anthropic_client(gateway, token).messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        assert chat.choices[0].finish_reason == "length"
        assert (response.status, response.output_text) == ("incomplete", "half an ans")
        assert (last.type, last.response.status) == ("response.incomplete", "incomplete")
        assert message.stop_reason == "max_tokens"

    asyncio.run(scenario())
