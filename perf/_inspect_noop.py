"""Inspect AI's no-op eval of N samples, timed: the child that ``bench_vs_inspect.py`` runs with the Python
of its own Inspect venv (this file needs the standard library and ``inspect_ai`` only, not this project).

The Task has N samples (input "Reply with answer-i", target "answer-i"), the solver ``generate()``, the
scorer ``includes()`` and the model ``mockllm/model``, whose default output is never the target: a
no-op workload. ``max_samples`` and ``max_connections`` are --concurrency, the log goes to --log-dir and
nothing is displayed. The mock's answers carry their token usage, because mockllm otherwise counts the
input's tokens with tiktoken's o200k_base encoding, which it downloads on first use (no network here);
so each sample does a little less than with the mock's default.

Prints one JSON object on its last stdout line: the eval() call's wall and user+system CPU seconds, this
process's peak RSS after it, the log's status and its sample counts, and ``problems``: what is wrong with
the log (not status success with N of N samples completed). ``timed_eval`` does that for any Task, and
``_inspect_latency.py`` imports it.

    python perf/_inspect_noop.py --n N [--concurrency 8] --log-dir DIR
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import inspect_ai
from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate
from inspect_ai.tool import ToolChoice, ToolInfo

MOCK_OUTPUT = "Default output from mockllm/model"


def mock_output(
    messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
) -> ModelOutput:
    output = ModelOutput.from_content(model="mockllm", content=MOCK_OUTPUT)
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def samples(n: int) -> list[Sample]:
    """The N samples: input "Reply with answer-i", target "answer-i"."""
    return [Sample(input=f"Reply with answer-{i}", target=f"answer-{i}") for i in range(n)]


def timed_eval(task: Task, n: int, concurrency: int, log_dir: Path, **eval_args: Any) -> dict[str, Any]:
    """eval() of ``task`` (N samples), timed, with max_samples = max_connections = ``concurrency``, its log in
    ``log_dir`` and no display; ``eval_args`` are eval()'s others (the model). ``problems`` says what is
    wrong with the log: anything but status success with N of N samples completed."""
    started, cpu_started = time.perf_counter(), cpu_seconds()
    log = inspect_ai.eval(
        task, display="none", log_dir=str(log_dir), max_samples=concurrency, max_connections=concurrency, **eval_args
    )[0]
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
    error = log.error.message if log.error else ""
    total = log.results.total_samples if log.results else 0
    completed = log.results.completed_samples if log.results else 0
    problems = []
    if log.status != "success" or total != n or completed != n:
        problems.append(
            f"Inspect's log: status {log.status} {error}, {completed} of {total} samples completed, expected {n} of {n}"
        )
    return {
        "n": n,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "status": log.status,
        "error": error,
        "total_samples": total,
        "completed_samples": completed,
        "log": log.location,
        "problems": problems,
    }


def run_eval(n: int, concurrency: int, log_dir: Path) -> dict[str, Any]:
    task = Task(dataset=samples(n), solver=generate(), scorer=includes())
    return timed_eval(task, n, concurrency, log_dir, model=get_model("mockllm/model", custom_outputs=mock_output))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--log-dir", type=Path, required=True)
    args = parser.parse_args()
    print(json.dumps(run_eval(args.n, args.concurrency, args.log_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
