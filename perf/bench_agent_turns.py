"""The framework's own overhead per agent turn, against an endpoint that answers at once.

One attempt of the ``tool_agent`` (or ``miniswe``) harness on the demo task ``count-errors`` runs
--turns turns of ``bash true`` and then submits, against a local OpenAI-compatible HTTP server that
answers every chat completion immediately, through the real ``openai_compat`` model (the SDK, HTTP),
in the ``local`` or ``sandbox`` environment, with checkpoints on or off. From the attempt's trajectory:

    overhead per turn = (attempt time - sum of the model calls' own time - sum of the commands' own time) / turns

where a model call's own time is what ``openai_compat`` measured around the SDK call and a command's
own time is the environment's measure of ``exec``, both read from the attempt's activity log (the
attempt time is the detail's, which also holds opening and closing the environment and scoring). What is
left is the loop: activity-log appends (fsynced), checkpoints, the command wrapper's bookkeeping,
redaction, the event loop.

    python perf/bench_agent_turns.py [--turns 50] [--harness tool_agent] [--environment local]
                                           [--no-checkpoints] [--json]

Target: <= 20 ms per turn. It is reported, never asserted; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.request import ExecutionConfig, LimitsConfig, OutputConfig, EvalRequest
from agentcompass_dagster.durable.activity import read_activity
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate

TARGET_MS = 20.0
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class InstantEndpoint:
    """Answers turn n (the number of assistant messages so far) with ``bash true``, the last with a submit."""

    def __init__(self, turns: int, harness: str) -> None:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                turn = sum(m.get("role") == "assistant" for m in body["messages"])
                data = json.dumps(endpoint.completion(turn)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.turns, self.harness = turns, harness
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def completion(self, turn: int) -> dict[str, Any]:
        if turn < self.turns:
            name, arguments = "bash", {"command": "true"}
        elif self.harness == "miniswe":
            name, arguments = "bash", {"command": f"echo {SUBMIT_MARKER}; echo 5"}
        else:
            name, arguments = "submit", {"answer": "5"}
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "instant",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }


def measure(turns: int, harness: str, environment: str, checkpoints: bool) -> dict[str, Any]:
    endpoint = InstantEndpoint(turns, harness)
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as results:
        request = EvalRequest(
            name="bench",
            benchmark=BenchmarkConfig(id="demo", tasks=["count-errors"]),
            model=ModelConfig(
                id="instant",
                provider="openai_compat",
                model="instant",
                base_url=endpoint.base_url,
                params={"max_retries": 0},
            ),
            harness=HarnessConfig(id=harness, params={"checkpoints": checkpoints}),
            environment=EnvironmentConfig(id=environment),
            execution=ExecutionConfig(limits=LimitsConfig(max_turns=turns + 2)),
            output=OutputConfig(results_dir=Path(results)),
        )
        result = orchestrate([request])
        outcome = next(iter(result.outcomes.values()))
        run_dir = Path(outcome.paths["run_dir"])
        detail = json.loads(next((run_dir / "details").glob("*.json")).read_text())
        records = read_activity(next(run_dir.rglob("activity.jsonl")))
    endpoint.server.shutdown()
    model_s = sum(
        r.data["response"]["duration_s"] for r in records if r.kind == "model_call" and r.status == "completed"
    )
    command_s = sum(
        r.data.get("duration_s") or 0.0 for r in records if r.kind == "tool_call" and r.status == "completed"
    )
    done = turns + 1
    attempt_s = detail["attempts"]["1"]["duration_s"]
    overhead = attempt_s - model_s - command_s
    return {
        "harness": harness,
        "environment": environment,
        "checkpoints": checkpoints,
        "turns": done,
        "attempt_s": round(attempt_s, 3),
        "model_s": round(model_s, 3),
        "command_s": round(command_s, 3),
        "overhead_ms_per_turn": round(1000 * overhead / done, 2),
        "model_ms_per_turn": round(1000 * model_s / done, 2),
        "command_ms_per_turn": round(1000 * command_s / done, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--harness", choices=["tool_agent", "miniswe"], nargs="+", default=["tool_agent", "miniswe"])
    parser.add_argument("--environment", nargs="+", default=["local"])
    parser.add_argument("--no-checkpoints", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [
        measure(args.turns, harness, environment, checkpoints)
        for harness in args.harness
        for environment in args.environment
        for checkpoints in ([False] if args.no_checkpoints else [True, False])
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| harness | environment | checkpoints | turns | overhead ms/turn | model ms/turn | command ms/turn |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['harness']} | {r['environment']} | {r['checkpoints']} | {r['turns']} | {r['overhead_ms_per_turn']} "
            f"| {r['model_ms_per_turn']} | {r['command_ms_per_turn']} |"
        )
    print(f"\ntarget: <= {TARGET_MS:g} ms/turn of overhead")


if __name__ == "__main__":
    main()
