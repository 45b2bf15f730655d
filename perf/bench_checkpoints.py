"""Cost of checkpoints (agentcompass_dagster.durable.checkpoints) next to git on the same tree.

What it measures, on a generated tree of --files files totalling --total-mb MB (sizes log-normal; a third
of the files pseudo-text, a third random bytes, a third half of each, so the tree is partly compressible):

* checkpoint: the first capture of the tree; a capture with nothing changed (walk and stat only); a
  capture after --changed files got 1 KB appended (only they should be read); a restore of the last
  checkpoint into a fresh, empty directory; the bytes the store holds (blobs and manifests).
* git, on a second copy of the tree: ``git init && git add -A && git commit``; the same --changed files
  changed the same way, then ``git add -A && git commit``; ``git archive HEAD | tar -x`` into an empty
  directory as the nearest thing to a restore; the size of ``.git``.

Sizes are apparent bytes and disk usage (``du``). Everything runs warm in the page cache, and the store
fsyncs every new blob and manifest while git by default does not fsync loose objects, so the write
timings favour git a little. Sanity checks (the exit status is non-zero when one fails): the capture
after the change reads exactly --changed files, the restored tree has the source tree's content and
modes, and every git command succeeds. Timings never fail the script: this is a report, not a test.

Run it from the repository root:

    python perf/bench_checkpoints.py [--files 1000] [--total-mb 50] [--changed 10] [--seed 0]
                                           [--dir DIR] [--json]

Without --dir the trees, the store and the repository go to a temp directory that is removed afterwards;
with it, a fresh ``bench-checkpoints-*`` directory below DIR is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _bench import report_problems, results_root

from agentcompass_dagster.durable.checkpoints import CheckpointStore

WORDS = [
    "def",
    "return",
    "self",
    "import",
    "class",
    "value",
    "result",
    "agent",
    "tool",
    "call",
    "step",
    "error",
    "file",
    "path",
    "test",
    "assert",
    "config",
    "model",
    "token",
    "json",
    "list",
    "dict",
    "print",
    "loop",
]
MB = 1_000_000


@dataclass
class Timing:
    system: str
    operation: str
    seconds: float
    files_read: int | None = None
    bytes_read: int | None = None


def text_pool(rng: random.Random, size: int) -> bytes:
    """Pseudo-source text to slice files from: compressible like code, but not one repeated line."""
    out, length = [], 0
    while length < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) + f" {rng.randint(0, 10**6)}\n"
        out.append(line)
        length += len(line)
    return "".join(out).encode()[:size]


def file_sizes(rng: random.Random, files: int, total: int) -> list[int]:
    raw = [rng.lognormvariate(0, 1.5) for _ in range(files)]
    scale = total / sum(raw)
    sizes = [max(1, int(r * scale)) for r in raw]
    sizes[0] += total - sum(sizes)
    return sizes


def make_tree(root: Path, files: int, total: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    sizes = file_sizes(rng, files, total)
    pool = text_pool(rng, max(sizes) + 1)
    paths = []
    for i, size in enumerate(sizes):
        path = root / f"pkg{i % 20:02d}" / f"sub{i % 7}" / f"file{i:05d}.dat"
        path.parent.mkdir(parents=True, exist_ok=True)
        start = rng.randrange(len(pool) - size + 1)
        text = pool[start : start + size]
        kind = i % 3
        if kind == 0:
            data = text
        elif kind == 1:
            data = rng.randbytes(size)
        else:
            data = text[: size // 2] + rng.randbytes(size - size // 2)
        path.write_bytes(data)
        os.chmod(path, 0o755 if i % 10 == 0 else 0o644)
        paths.append(path)
    return paths


def change(paths: list[Path], n: int, seed: int) -> list[str]:
    """Append 1 KB to n files spread over the tree; the relative names of those files."""
    rng = random.Random(seed + 1)
    chosen = paths[:: max(1, len(paths) // n)][:n]
    for path in chosen:
        with open(path, "ab") as f:
            f.write(rng.randbytes(512) + b"x" * 512)
    return [str(p) for p in chosen]


def timed(function: Any, *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "gc.auto=0",
            *args,
        ],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def du(path: Path) -> dict[str, int]:
    def run(*flags: str) -> int:
        out = subprocess.run(
            ["du", "-s", "--block-size=1", *flags, str(path)], check=True, capture_output=True, text=True
        )
        return int(out.stdout.split()[0])

    return {"apparent_bytes": run("--apparent-size"), "disk_bytes": run()}


def tree_state(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mode & 0o7777, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def measure(parent: Path, files: int, total: int, changed: int, seed: int) -> dict[str, Any]:
    timings: list[Timing] = []
    problems: list[str] = []
    work, repo = parent / "work", parent / "repo"
    paths = make_tree(work, files, total, seed)
    repo_paths = make_tree(repo, files, total, seed)
    store = CheckpointStore(parent / "store")
    roots = {"work": work}

    for seq, (operation, expected_reads) in enumerate(
        [("first capture", files), ("capture, no change", 0), (f"capture, {changed} changed", changed)], start=1
    ):
        if seq == 3:
            change(paths, changed, seed)
        seconds, _ = timed(store.capture, seq, roots)
        stats = store.last_capture_stats
        assert stats is not None
        timings.append(Timing("checkpoint", operation, seconds, stats.files_read, stats.bytes_read))
        if stats.files_read != expected_reads:
            problems.append(f"{operation}: read {stats.files_read} files, expected {expected_reads}")
    fresh = parent / "restored"
    seconds, _ = timed(store.restore, 3, {"work": fresh})
    timings.append(Timing("checkpoint", "restore into empty dir", seconds))
    if tree_state(fresh) != tree_state(work):
        problems.append("the restored tree differs from the captured one")

    seconds, _ = timed(lambda: (git(repo, "init", "-q"), git(repo, "add", "-A"), git(repo, "commit", "-q", "-m", "1")))
    timings.append(Timing("git", "init + add -A + commit", seconds))
    change(repo_paths, changed, seed)
    seconds, _ = timed(lambda: (git(repo, "add", "-A"), git(repo, "commit", "-q", "-m", "2")))
    timings.append(Timing("git", f"add -A + commit, {changed} changed", seconds))
    git_fresh = parent / "git-restored"
    git_fresh.mkdir()
    seconds, _ = timed(
        lambda: subprocess.run(
            f"git archive HEAD | tar -x -C {shlex.quote(str(git_fresh))}", shell=True, cwd=repo, check=True
        )
    )
    timings.append(Timing("git", "archive | tar into empty dir", seconds))
    if {k: v[1] for k, v in tree_state(git_fresh).items()} != {k: v[1] for k, v in tree_state(work).items()}:
        problems.append("git's tree differs from the checkpoint's")

    manifests = sorted((store.root / "manifests").glob("*.json"))
    return {
        "timings": [asdict(t) for t in timings],
        "storage": {
            "tree": du(work),
            "checkpoint store": {**du(store.root), "stored_bytes": store.stored_bytes()},
            ".git": du(repo / ".git"),
        },
        "manifest_bytes": manifests[-1].stat().st_size,
        "problems": problems,
    }


def render(result: dict[str, Any]) -> str:
    header = f"{'system':<11} {'operation':<32} {'seconds':>8} {'files read':>10} {'MB read':>8}"
    rows = [header, "-" * len(header)]
    for t in result["timings"]:
        files = "" if t["files_read"] is None else str(t["files_read"])
        read = "" if t["bytes_read"] is None else f"{t['bytes_read'] / MB:.1f}"
        rows.append(f"{t['system']:<11} {t['operation']:<32} {t['seconds']:>8.3f} {files:>10} {read:>8}")
    storage = f"{'storage':<18} {'apparent MB':>12} {'disk MB':>9}"
    rows += ["", storage, "-" * len(storage)]
    for name, sizes in result["storage"].items():
        rows.append(f"{name:<18} {sizes['apparent_bytes'] / MB:>12.2f} {sizes['disk_bytes'] / MB:>9.2f}")
    rows.append(f"\none manifest: {result['manifest_bytes'] / 1000:.1f} KB")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000, help="files in the tree (default 1000)")
    parser.add_argument("--total-mb", type=float, default=50.0, help="total size of the tree in MB (default 50)")
    parser.add_argument("--changed", type=int, default=10, help="files changed between captures (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, help="keep the trees, the store and the repository below this directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.files < 1 or args.total_mb <= 0 or not 0 < args.changed <= args.files:
        parser.error("--files and --total-mb must be positive and --changed within 1..--files")

    command = shlex.join([sys.executable, *sys.argv])
    with results_root(args.dir, "bench-checkpoints-") as root:
        parent = Path(tempfile.mkdtemp(prefix="bench-checkpoints-", dir=root))
        result = measure(parent, args.files, int(args.total_mb * MB), args.changed, args.seed)
    if args.json:
        print(
            json.dumps(
                {"command": command, "files": args.files, "total_mb": args.total_mb, "changed": args.changed, **result},
                indent=2,
            )
        )
    else:
        print(f"command: {command}")
        print(f"{args.files} files, {args.total_mb:g} MB, {args.changed} changed\n")
        print(render(result))
    return report_problems(result["problems"])


if __name__ == "__main__":
    sys.exit(main())
