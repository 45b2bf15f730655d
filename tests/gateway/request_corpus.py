"""Requests of the three API families, written by hand to cover what agent CLIs send (issue 38), for the
check that the gateway's converters read them as LiteLLM's adapters do; the captured requests of real
agents in tests/data/agent_requests/ are added by the test."""

from __future__ import annotations

from typing import Any

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
LONG_NAME = "mcp__a_very_long_server_name_for_testing__and_an_even_longer_tool_name_beyond_64"

_A_TOOL = {"name": "bash", "description": "run a command", "input_schema": SCHEMA}
_A_USE = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}
_A_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}


def _anthropic(messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 1024, "messages": messages, **extra}


ANTHROPIC: dict[str, dict[str, Any]] = {
    "plain string": _anthropic([{"role": "user", "content": "hi"}]),
    "system string": _anthropic([{"role": "user", "content": "hi"}], system="be brief"),
    "system blocks with cache_control": _anthropic(
        [{"role": "user", "content": "hi"}],
        system=[
            {"type": "text", "text": "one"},
            {"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}},
        ],
    ),
    "text blocks": _anthropic(
        [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    ),
    "base64 and url images": _anthropic(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is it"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                ],
            }
        ]
    ),
    "tool round trip": _anthropic(
        [
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": [{"type": "text", "text": "sure"}, _A_USE]},
            {"role": "user", "content": [_A_RESULT]},
        ],
        tools=[_A_TOOL],
    ),
    "tool result as blocks, is_error": _anthropic(
        [
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": [_A_USE]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "exit 1"}, {"type": "text", "text": "no"}],
                    },
                    {"type": "text", "text": "try again"},
                ],
            },
        ],
        tools=[_A_TOOL],
    ),
    "tool result one block, empty, parallel": _anthropic(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [_A_USE, {**_A_USE, "id": "toolu_2", "input": {"command": "pwd"}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "x"}]},
                    {"type": "tool_result", "tool_use_id": "toolu_2"},
                ],
            },
        ],
        tools=[_A_TOOL],
    ),
    "thinking dropped": _anthropic(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "xyz"},
                    _A_USE,
                ],
            },
            {"role": "user", "content": [_A_RESULT]},
        ],
        tools=[_A_TOOL],
        thinking={"type": "enabled", "budget_tokens": 500},
    ),
    "assistant string, stop sequences, sampling": _anthropic(
        [
            {"role": "user", "content": "count"},
            {"role": "assistant", "content": "1 2"},
            {"role": "user", "content": "go on"},
        ],
        stop_sequences=["5"],
        temperature=0.2,
        top_p=0.9,
        top_k=5,
    ),
    "tool_choice any": _anthropic([{"role": "user", "content": "x"}], tools=[_A_TOOL], tool_choice={"type": "any"}),
    "tool_choice tool": _anthropic(
        [{"role": "user", "content": "x"}], tools=[_A_TOOL], tool_choice={"type": "tool", "name": "bash"}
    ),
    "tool_choice auto and none": _anthropic(
        [{"role": "user", "content": "x"}], tools=[_A_TOOL], tool_choice={"type": "none"}
    ),
    "server tools skipped": _anthropic(
        [{"role": "user", "content": "x"}],
        tools=[
            _A_TOOL,
            {"type": "bash_20250124", "name": "bash2"},
            {"type": "text_editor_20250124", "name": "str_replace_editor"},
            {"type": "custom", "name": "custom_one", "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}},
        ],
    ),
    "a name over 64 characters": _anthropic(
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{**_A_USE, "name": LONG_NAME}]},
            {"role": "user", "content": [_A_RESULT]},
        ],
        tools=[{**_A_TOOL, "name": LONG_NAME}],
    ),
    "metadata ignored, system reminder after the first turn": _anthropic(
        [
            {"role": "user", "content": "x"},
            {"role": "system", "content": "reminder"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "y"},
        ],
        metadata={"user_id": "u-1"},
    ),
}

_R_TOOL = {"type": "function", "name": "bash", "description": "run a command", "parameters": SCHEMA}
_R_CALL = {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": '{"command": "ls"}'}
_R_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"}


def _responses(input_: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "input": input_, **extra}


RESPONSES: dict[str, dict[str, Any]] = {
    "input string": _responses("hi"),
    "instructions": _responses("hi", instructions="be brief"),
    "easy message": _responses([{"role": "user", "content": "hi"}]),
    "message items with parts": _responses(
        [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
            }
        ]
    ),
    "developer message": _responses(
        [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"role": "user", "content": "hi"},
        ]
    ),
    "input image": _responses(
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
                ],
            }
        ]
    ),
    "tool round trip": _responses([{"role": "user", "content": "list"}, _R_CALL, _R_OUTPUT], tools=[_R_TOOL]),
    "assistant text then call": _responses(
        [
            {"role": "user", "content": "list"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "sure"}]},
            _R_CALL,
            _R_OUTPUT,
        ],
        tools=[_R_TOOL],
    ),
    "parallel calls": _responses(
        [
            {"role": "user", "content": "go"},
            _R_CALL,
            {**_R_CALL, "call_id": "call_2", "arguments": '{"command": "pwd"}'},
            _R_OUTPUT,
            {**_R_OUTPUT, "call_id": "call_2", "output": "/w"},
        ],
        tools=[_R_TOOL],
    ),
    "reasoning items dropped": _responses(
        [
            {"role": "user", "content": "go"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xyz"},
            _R_CALL,
            _R_OUTPUT,
        ],
        tools=[_R_TOOL],
        reasoning={"effort": "low"},
        include=["reasoning.encrypted_content"],
    ),
    "output as parts": _responses(
        [
            {"role": "user", "content": "go"},
            _R_CALL,
            {**_R_OUTPUT, "output": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        ],
        tools=[_R_TOOL],
    ),
    "max_output_tokens and sampling": _responses("hi", max_output_tokens=77, temperature=0.3, top_p=0.5),
    "tool_choice required": _responses("x", tools=[_R_TOOL], tool_choice="required"),
    "tool_choice function": _responses("x", tools=[_R_TOOL], tool_choice={"type": "function", "name": "bash"}),
    "hosted tools skipped": _responses("x", tools=[_R_TOOL, {"type": "web_search"}, {"type": "local_shell"}]),
    "strict tool, no description": _responses(
        "x",
        tools=[{"type": "function", "name": "f", "parameters": SCHEMA, "strict": True}],
        store=False,
        parallel_tool_calls=False,
    ),
}

_C_TOOL = {"type": "function", "function": {"name": "bash", "description": "run", "parameters": SCHEMA}}
_C_CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}

CHAT: dict[str, dict[str, Any]] = {
    "plain": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "system and sampling": {
        "model": "m",
        "temperature": 0,
        "max_tokens": 9,
        "stop": ["\n"],
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
    },
    "tool round trip": {
        "model": "m",
        "tools": [_C_TOOL],
        "tool_choice": "auto",
        "messages": [
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": None, "tool_calls": [_C_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        ],
    },
    "streamed calls echoed with index": {
        "model": "m",
        "tools": [_C_TOOL],
        "messages": [
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": "", "tool_calls": [{**_C_CALL, "index": 0}], "refusal": None},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    },
    "parts and image": {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            }
        ],
    },
    "developer role and reasoning effort": {
        "model": "m",
        "reasoning_effort": "low",
        "messages": [{"role": "developer", "content": "rules"}, {"role": "user", "content": "hi"}],
    },
    "response_format": {
        "model": "m",
        "response_format": {"type": "json_object"},
        "messages": [{"role": "user", "content": "json please"}],
    },
    "named tool choice, parallel off": {
        "model": "m",
        "tools": [_C_TOOL],
        "parallel_tool_calls": False,
        "tool_choice": {"type": "function", "function": {"name": "bash"}},
        "messages": [{"role": "user", "content": "x"}],
    },
}
