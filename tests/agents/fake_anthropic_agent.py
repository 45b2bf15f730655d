"""A small agent CLI written for the tests with the ``anthropic`` SDK: like fake_openai_agent.py, over
the Anthropic Messages API, streaming every turn (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY).

    python3 fake_anthropic_agent.py
"""

import os
import subprocess
import sys

from anthropic import Anthropic

TOOLS = [
    {
        "name": "bash",
        "description": "Run a bash command in the working directory.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
    {
        "name": "submit",
        "description": "Finish with an answer.",
        "input_schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    },
]
MAX_TURNS = 20
LOG = os.path.expanduser("~/.fake-agent/turns.log")


def main():
    client = Anthropic(max_retries=1)
    model = os.environ.get("AGENT_MODEL", "claude-test")
    messages = [{"role": "user", "content": os.environ["AGENTCOMPASS_INSTRUCTION"]}]
    for _ in range(MAX_TURNS):
        with client.messages.stream(model=model, max_tokens=1024, messages=messages, tools=TOOLS) as stream:
            message = stream.get_final_message()
        uses = [block for block in message.content if block.type == "tool_use"]
        os.makedirs(os.path.dirname(LOG), exist_ok=True)
        with open(LOG, "a") as handle:
            handle.write(f"turn {message.stop_reason} {[use.name for use in uses]}\n")
        if not uses:
            print("".join(block.text for block in message.content if block.type == "text"))
            return 0
        messages.append({"role": "assistant", "content": [block.model_dump() for block in message.content]})
        results = []
        for use in uses:
            if use.name == "submit":
                print(use.input.get("answer", ""))
                return 0
            done = subprocess.run(["bash", "-c", use.input["command"]], capture_output=True, text=True, timeout=120)
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": f"exit code: {done.returncode}\n{done.stdout}{done.stderr}",
                }
            )
        messages.append({"role": "user", "content": results})
    return 1


if __name__ == "__main__":
    sys.exit(main())
