"""The trajectory viewer on a long attempt: how long its page takes to write, and to open in a browser.

One --direct run of the ``tool_agent`` harness with the scripted model on the demo task ``count-errors``:
--turns turns, each a command printing about --kb KB (300 x 36 KB, about 10 MB of output, by default;
each output is over the harness's 10,000 characters, so the log keeps it whole in a blob). Then:

- generation: ``write_trajectory_pages`` of the run directory (the page and its full-output files,
  redaction included), best of --repeat;
- browser: the page opened from disk in headless Chromium (/usr/bin/chromium, through playwright): the
  navigation's DOMContentLoaded and load times as the browser measures them, best of --repeat.

    python perf/bench_trajectory.py [--turns 300] [--kb 36] [--repeat 3] [--json]

Target: the page ready in the browser in under 1 s. Reported, never asserted; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from agentcompass_dagster.cli.main import main
from agentcompass_dagster.reporting.trajectory import write_trajectory_pages

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TARGET_S = 1.0


def make_run(directory: Path, turns: int, kb: int) -> Path:
    """A finished run whose count-errors attempt ran ``turns`` commands of about ``kb`` KB of output each."""
    lines = kb * 1024 // 7  # seq prints 6-digit numbers and a newline
    script = [
        {
            "tool_calls": [{"name": "bash", "arguments": {"command": f"seq {100000 + i} {100000 + i + lines}"}}],
            "content": f"turn {i}: looking further",
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50},
        }
        for i in range(turns)
    ]
    script.append({"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]})
    sweep = directory / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "name": "bench",
                "benchmarks": [{"id": "demo", "tasks": ["count-errors"]}],
                "models": [{"id": "scripted", "provider": "scripted", "params": {"turns": {"count-errors": script}}}],
                "harness": {"id": "tool_agent"},
                "environment": "local",
                "execution": {"limits": {"max_turns": turns + 1}},
                "output": {"results_dir": str(directory / "results")},
            }
        )
    )
    main(["run", str(sweep), "--direct"])
    return next((directory / "results").rglob("run_info.json")).parent


def browser_load(page_path: Path, repeat: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    best: dict[str, float] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for _ in range(repeat):
                page = browser.new_page()
                page.goto(page_path.resolve().as_uri(), wait_until="load")
                timing = page.evaluate("""() => { const n = performance.getEntriesByType('navigation')[0];
                    return {dom_content_loaded_s: n.domContentLoadedEventEnd / 1000, load_s: n.loadEventEnd / 1000,
                            steps: document.querySelectorAll('.step').length}; }""")
                page.close()
                best = timing if not best or timing["load_s"] < best["load_s"] else best
        finally:
            browser.close()
    return best


def main_bench(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--kb", type=int, default=36)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-trajectory-") as tmp:
        run_dir = make_run(Path(tmp), args.turns, args.kb)
        output_bytes = sum(p.stat().st_size for p in (run_dir / ".durable").rglob("blobs/*") if p.is_file())
        generation = []
        for index in range(args.repeat):
            started = time.perf_counter()
            pages = write_trajectory_pages(run_dir, Path(tmp) / f"report{index}")
            generation.append(time.perf_counter() - started)
        (page,) = pages.values()
        result: dict[str, Any] = {
            "turns": args.turns,
            "output_mb": round(output_bytes / 1e6, 2),
            "generation_s": round(min(generation), 3),
            "page_kb": round(page.stat().st_size / 1024, 1),
            "full_output_files": sum(1 for _ in (page.parent / page.stem).iterdir()),
            **{name: round(value, 3) for name, value in browser_load(page, args.repeat).items()},
        }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{result['turns']} turns, {result['output_mb']} MB of output: page written in {result['generation_s']} s "
            f"({result['page_kb']} KB, {result['full_output_files']} full-output files); in Chromium "
            f"DOMContentLoaded {result['dom_content_loaded_s']} s, load {result['load_s']} s "
            f"({result['steps']} steps; target < {TARGET_S} s)"
        )
    return result


if __name__ == "__main__":
    sys.exit(0 if main_bench() else 1)
