"""What a SQLite Dagster instance stores, per task: the files of DAGSTER_HOME, the event log's tables and
indexes by the pages they occupy, its event rows by type (how many per task, how long their serialized
event is), how many rows share a page, and the rows beside them (event tags, dynamic partitions, asset
and check rows).

Run it on an instance that ``bench_vs_inspect.py --sides dagster --n N --results-dir DIR`` kept (its
DAGSTER_HOME is DIR/dagster-nN-*/dagster_home), N the number of tasks:

    python perf/instance_bytes.py DIR/dagster-n1000-*/dagster_home --tasks 1000

SQLite stores rows in pages (4,096 bytes unless the database was made with another size): a row longer
than half a page has a page to itself, so the page table ("rows per page") says what a smaller event
would save. Needs the ``dbstat`` table of SQLite (compiled in with Python's own sqlite3 on most builds).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

EVENT_LOG = Path("history") / "event_log.db"


def file_bytes(home: Path) -> list[tuple[str, int]]:
    """Every regular file below ``home`` and its size, largest first."""
    found = []
    for directory, _, names in os.walk(home):
        for name in names:
            path = Path(directory) / name
            if not path.is_symlink():
                found.append((str(path.relative_to(home)), path.stat().st_size))
    return sorted(found, key=lambda item: -item[1])


def report(home: Path, tasks: int) -> str:
    lines = [f"{home}: {tasks} tasks", "", "files (bytes per task):"]
    files = file_bytes(home)
    lines += [f"  {size / tasks:9.0f}  {name}" for name, size in files if size]
    lines.append(f"  {sum(size for _, size in files) / tasks:9.0f}  total")
    with sqlite3.connect(f"file:{home / EVENT_LOG}?mode=ro", uri=True) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        lines += ["", f"event log by table and index (pages of {page_size} bytes; bytes per task, unused share):"]
        for name, size, unused in conn.execute(
            "SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ):
            if size >= 2 * page_size:
                lines.append(f"  {size / tasks:9.0f}  {unused / size:4.0%}  {name}")
        lines += ["", "event rows by type (rows per task, average serialized event bytes):"]
        for kind, count, length in conn.execute(
            "SELECT dagster_event_type, count(*), avg(length(event)) FROM event_logs GROUP BY 1 ORDER BY 2 DESC"
        ):
            lines.append(f"  {count / tasks:7.3f}  {length:7.0f}  {kind}")
        per_page = Counter(
            row[0] for row in conn.execute("SELECT ncell FROM dbstat WHERE name = 'event_logs' AND pagetype = 'leaf'")
        )
        lines += ["", "event_logs leaf pages by rows per page (pages):"]
        lines += [f"  {cells:3d} rows: {pages}" for cells, pages in sorted(per_page.items())]
        lines += ["", "rows beside the events (rows per task):"]
        for table in ("asset_event_tags", "dynamic_partitions", "asset_keys", "asset_check_executions"):
            (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # the fixed names above
            lines.append(f"  {count / tasks:7.3f}  {table}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("home", type=Path, help="a DAGSTER_HOME with a SQLite event log")
    parser.add_argument("--tasks", type=int, required=True, help="the number of tasks its sweep ran")
    args = parser.parse_args(argv)
    if not (args.home / EVENT_LOG).is_file():
        parser.error(f"no {EVENT_LOG} in {args.home}: not a SQLite instance")
    print(report(args.home, args.tasks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
