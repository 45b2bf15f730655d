"""Inspect AI's eval of N samples against an OpenAI-compatible endpoint, timed: the child that
``bench_latency.py`` runs with the Python of its own Inspect venv (this file needs the standard library,
``inspect_ai`` and its sibling ``_inspect_noop.py`` only, not this project).

The Task has N samples (input "Reply with answer-i", target "answer-i"), the solver --calls ``generate()``
calls in a chain (each sends the conversation so far, answers included), the scorer ``includes()``, and
the model ``openai/<--model>`` through Inspect's openai provider (chat completions, not streamed) with
``model_base_url`` --base-url and the key in OPENAI_API_KEY (the endpoint takes any). ``max_samples`` and
``max_connections`` are --concurrency, the log goes to --log-dir and nothing is displayed.

Prints one JSON object on its last stdout line, ``_inspect_noop.timed_eval``'s: the eval() call's wall and
user+system CPU seconds, this process's peak RSS after it, the log's status and sample counts, and its
problems (not status success with N of N samples completed).

    OPENAI_API_KEY=... python perf/_inspect_latency.py --n N --calls 3 --concurrency 16 \\
        --base-url http://127.0.0.1:PORT/v1 --model latency --log-dir DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _inspect_noop import samples, timed_eval
from inspect_ai import Task
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--calls", type=int, default=3, help="generate() calls per sample (default 3)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--base-url", required=True, help="the endpoint, e.g. http://127.0.0.1:PORT/v1")
    parser.add_argument("--model", default="latency", help="the model name the endpoint is asked for")
    parser.add_argument("--log-dir", type=Path, required=True)
    args = parser.parse_args()
    task = Task(dataset=samples(args.n), solver=[generate() for _ in range(args.calls)], scorer=includes())
    # Chat completions, not streamed, whatever Inspect would pick for a model of that name.
    data = timed_eval(
        task,
        args.n,
        args.concurrency,
        args.log_dir,
        model=f"openai/{args.model}",
        model_base_url=args.base_url,
        model_args={"responses_api": False, "streaming": False},
    )
    print(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
