"""A small agent CLI written for the tests with the ``openai`` SDK, as a third-party agent would be: it
reads its instruction from $AGENTCOMPASS_INSTRUCTION, its endpoint and key from OPENAI_BASE_URL and
OPENAI_API_KEY, and offers the model two tools, ``bash`` and ``submit``, over the Chat Completions API
(``chat``) or the Responses API (``responses``), until the model submits or answers in text.

    python3 fake_openai_agent.py chat|responses
"""

import json
import os
import subprocess
import sys

from openai import OpenAI

TOOLS = [
    {
        "name": "bash",
        "description": "Run a bash command in the working directory.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
    {
        "name": "submit",
        "description": "Finish with an answer.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    },
]
MAX_TURNS = 20
# The agent's own log, which its declaration names for the framework to keep.
LOG = os.path.expanduser("~/.fake-agent/turns.log")


def log(line):
    os.makedirs(os.path.dirname(LOG), exist_ok=True)
    with open(LOG, "a") as handle:
        handle.write(line + "\n")


def run_tool(name, arguments):
    """The tool's output, or None for submit (whose answer is printed and ends the run)."""
    args = json.loads(arguments or "{}")
    log(f"tool {name} {arguments}")
    if name == "submit":
        print(args.get("answer", ""))
        return None
    done = subprocess.run(["bash", "-c", args["command"]], capture_output=True, text=True, timeout=120)
    return f"exit code: {done.returncode}\n{done.stdout}{done.stderr}"


def chat(client, model, instruction):
    messages = [{"role": "user", "content": instruction}]
    tools = [{"type": "function", "function": tool} for tool in TOOLS]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model=model, messages=messages, tools=tools).choices[0].message
        if not reply.tool_calls:
            print(reply.content or "")
            return 0
        messages.append(
            {
                "role": "assistant",
                "content": reply.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in reply.tool_calls
                ],
            }
        )
        for call in reply.tool_calls:
            output = run_tool(call.function.name, call.function.arguments)
            if output is None:
                return 0
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    return 1


def responses(client, model, instruction):
    items = [{"role": "user", "content": instruction}]
    tools = [{"type": "function", **tool} for tool in TOOLS]
    for _ in range(MAX_TURNS):
        response = client.responses.create(model=model, input=items, tools=tools)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            print(response.output_text)
            return 0
        for call in calls:
            items.append(
                {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments}
            )
            output = run_tool(call.name, call.arguments)
            if output is None:
                return 0
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": output})
    return 1


def main():
    client = OpenAI(max_retries=1)
    api = {"chat": chat, "responses": responses}[sys.argv[1]]
    return api(client, os.environ.get("AGENT_MODEL", "gpt-test"), os.environ["AGENTCOMPASS_INSTRUCTION"])


if __name__ == "__main__":
    sys.exit(main())
