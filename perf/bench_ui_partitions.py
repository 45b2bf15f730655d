"""How long the Dagster UI takes to show the partitions of a sweep's attempts asset, in Chromium.

Give it the working directory of a dagster side that bench_vs_inspect.py kept (``--results-dir DIR``:
``DIR/dagster-n<N>-*/`` holds ``bench_vs_inspect.yaml`` and ``dagster_home``). It starts ``agentcompass
ui`` of that sweep on a free port with that DAGSTER_HOME, waits until the webserver answers, then opens
``/assets/bench_vs_inspect/synthetic/attempts?view=partitions`` in headless Chromium (/usr/bin/chromium, through
playwright) --loads times, each in a fresh page, and prints the seconds from the navigation to the
partition counts showing ``Materialized (N)`` (N the sweep's tasks, no thousands separator). The first
load includes the webserver's first queries of the instance.

    python perf/bench_ui_partitions.py WORKDIR [--loads 3]

The goal of issue #27: under 5 s at N=100,000, on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

CHROMIUM = Path("/usr/bin/chromium")
START_TIMEOUT_S = 300.0
PAGE_TIMEOUT_MS = 120_000
SWEEP_NAME = "bench_vs_inspect"  # bench_vs_inspect.py's


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path, help="a dagster-n<N>-* directory kept by bench_vs_inspect.py")
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args(argv)
    sweep = args.workdir / f"{SWEEP_NAME}.yaml"
    n = int(yaml.safe_load(sweep.read_text())["benchmarks"][0]["params"]["n_tasks"])
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(args.workdir / "dagster_home")}
    log = (args.workdir / "ui.log").open("wb")
    ui = subprocess.Popen(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "ui", str(sweep), "--port", str(port)],
        cwd=args.workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(f"{base}/server_info"):
            if ui.poll() is not None or time.monotonic() > deadline:
                print(f"the UI did not start: see {args.workdir / 'ui.log'}", file=sys.stderr)
                return 1
            time.sleep(0.5)
        from playwright.sync_api import expect, sync_playwright

        shown = f"Materialized ({n})"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            try:
                for load in range(1, args.loads + 1):
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    start = time.perf_counter()
                    page.goto(f"{base}/assets/{SWEEP_NAME}/synthetic/attempts?view=partitions")
                    expect(page.get_by_text(shown, exact=True)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
                    print(f"load {load}: {time.perf_counter() - start:.2f} s to show {shown!r} (N={n:,})")
                    page.close()
            finally:
                browser.close()
    finally:
        os.killpg(ui.pid, signal.SIGINT)
        try:
            ui.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
            ui.wait()
        log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
