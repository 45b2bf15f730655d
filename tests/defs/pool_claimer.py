"""A process that claims one pool's slot over and over from several threads, as a Dagster run's
attempts do, and records each span it held the slot (CLOCK_MONOTONIC, comparable across processes).

    python pool_claimer.py DAGSTER_HOME POOL RUN_ID THREADS CYCLES SPANS_FILE

It prints "ready" once its instance is open and starts claiming when a line arrives on stdin, so the
test starts every claimer at once.
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time
from pathlib import Path

import dagster as dg

from agentcompass_dagster.defs.instance import ensure_dagster_home


def main(home: str, pool: str, run_id: str, threads: int, cycles: int, spans_file: str) -> None:
    ensure_dagster_home(Path(home))
    storage = dg.DagsterInstance.get().event_log_storage
    spans: list[tuple[float, float]] = []

    def claim_and_free() -> None:
        for _ in range(cycles):
            claimer = f"attempts#{secrets.token_hex(6)}"
            while not storage.claim_concurrency_slot(pool, run_id, claimer).is_claimed:
                time.sleep(0.005)
            start = time.monotonic()
            time.sleep(0.002)
            spans.append((start, time.monotonic()))
            storage.free_concurrency_slot_for_step(run_id, claimer)

    workers = [threading.Thread(target=claim_and_free) for _ in range(threads)]
    print("ready", flush=True)
    sys.stdin.readline()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    Path(spans_file).write_text(json.dumps(spans))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
