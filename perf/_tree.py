"""A command's whole process tree, measured: the child that ``_bench.measure_tree`` runs for
``bench_vs_inspect.py`` (its ``dagster`` side), ``bench_demo.py`` and ``bench_latency.py`` (every side).

`agentcompass run` starts run-worker processes that may outlive the CLI's own wait, so this process
makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER) before it starts the command: every
descendant orphaned on the way is re-parented to it instead of to init. Once the command has exited it
reaps (``waitpid(-1)``) until it has no child left, and only then reads RUSAGE_CHILDREN, which then holds
the user+system CPU of every process of the tree, and as ru_maxrss the peak RSS of its largest single
process. Why a process of its own: RUSAGE_CHILDREN is cumulative, and its ru_maxrss a maximum over every
child ever waited for, so the measuring process must have had no other child; and on Linux a process's
ru_maxrss includes its parent's peak RSS at the time it was started (the memory it was forked from),
which is why this file needs the standard library only: the command's processes inherit the peak of
this small interpreter, not that of the benchmark script.

Prints one JSON object on its last stdout line: the command's exit status, the wall seconds until it
exited and until its last descendant was reaped, the tree's CPU seconds and peak RSS, and the command's
stdout (kept in a temp file, not a pipe: a lingering descendant holding a pipe would hold up reading it).
The command's stderr passes through to this process's stderr.

    python perf/_tree.py -- COMMAND [ARG ...]
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>


@dataclass
class TreeRun:
    """One command's process tree, from its start until every process of it has been reaped."""

    returncode: int
    seconds: float  # until the command itself exited
    tree_seconds: float  # until its last descendant was reaped
    cpu_seconds: float  # user+system of every process of the tree
    peak_rss_mb: float  # the largest single process's peak
    stdout: str
    error: str = ""  # why there is no measurement (set by the caller when this child failed)


def make_subreaper() -> None:
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_all() -> None:
    """Wait for every child left, orphaned descendants included, until there is none."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def run_tree(command: list[str]) -> TreeRun:
    """Run ``command`` in this process, which must have had no child before, and measure its tree."""
    make_subreaper()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_started = usage.ru_utime + usage.ru_stime  # 0 in a fresh process; the difference all the same
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out)
        returncode = proc.wait()
        seconds = time.perf_counter() - started
        reap_all()
        tree_seconds = time.perf_counter() - started
        out.seek(0)
        stdout = out.read().decode(errors="replace")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return TreeRun(
        returncode,
        seconds,
        tree_seconds,
        usage.ru_utime + usage.ru_stime - cpu_started,
        usage.ru_maxrss / 1024.0,
        stdout,
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print(__doc__.rstrip().rsplit("\n", 1)[-1].strip(), file=sys.stderr)
        return 2
    print(json.dumps(asdict(run_tree(argv[1:]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
