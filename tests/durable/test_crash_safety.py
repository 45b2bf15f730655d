"""R-STORE-6: a writer killed mid-write loses nothing it finished, and leaves nothing half-written.

Real processes write large task details through RunDir.save_detail and are SIGKILLed in the
middle of their stream, and one more dies by SIGXFSZ inside os.write (RLIMIT_FSIZE), half-way through a
file, every time; the run directory is then read back by the loaders and by `summary`
(rerender_summary). The other tests race writers for one task id and check error/normal precedence.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentcompass_dagster.runtime.execution.finalize import rerender_summary
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_store import RunStore
from agentcompass_dagster.contracts.records import EvaluatedAttempt, TaskSpec
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

KILLS = 3  # writers SIGKILLed at a random moment after a few progress lines
WRITERS = KILLS + 1  # and one that dies inside a write, every time
RANGE = 5000  # task indexes per writer process: far more than it gets to before it is killed
PROGRESS_LINES_BEFORE_KILL = 2
FSIZE_LIMIT = 100_000  # bytes: about half of the details are larger
FSIZE_AFTER_WRITES = 60

# The writer. argv: results_dir, writer number k, run dir path or "-" to reserve a new one, RANGE,
# number of writers, and "-" or a number of writes after which it limits its file size (RLIMIT_FSIZE) to
# FSIZE_LIMIT with SIGXFSZ at its default action: the next detail larger than that kills it in the middle
# of os.write, leaving a temp file of exactly FSIZE_LIMIT bytes.
# For each task index i of its range [k*RANGE, (k+1)*RANGE):
#   i % 5 == 0  -> an error detail (error="boom")
#   i % 10 == 2 -> then a normal detail for task i-2: the retry that succeeded replaces that error
#   i % 5 != 0  -> a normal detail, correct unless i % 3 == 0
# Each detail is 50-200 KB (its trajectory). After the saves of index i, once 25 or more writes were made
# since the last report, it prints "done <i>": everything for indexes <= i has been saved.
WRITER = r"""
import sys
from pathlib import Path

from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_store import RunStore
from agentcompass_dagster.contracts.records import EvaluatedAttempt
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

results_dir, k, existing = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
RANGE, WRITERS = int(sys.argv[4]), int(sys.argv[5])
fsize_after = None if sys.argv[6] == "-" else int(sys.argv[6])
FSIZE_LIMIT = int(sys.argv[7])
if existing == "-":
    run_dir = RunStore(results_dir).reserve(results_dir / "crash" / "bench" / "model", None)
    request = EvalRequest(
        name="crash",
        benchmark=BenchmarkConfig(id="synthetic", params={"n_tasks": RANGE * WRITERS}),
        model=ModelConfig(id="model"),
        harness=HarnessConfig(id="nop"),
        environment=EnvironmentConfig(id="local"),
    )
    run_dir.record.write(request, [f"t{i:05d}" for i in range(RANGE * WRITERS)], run_dir.paths)
else:
    run_dir = RunDir(Path(existing))
print("dir", run_dir.path, flush=True)
sys.stdin.readline()  # released by the test with the other writers


def trajectory(i):
    return [
        {"type": "message", "role": "assistant", "content": f"step {j} of task {i}: " + "lorem ipsum " * 25}
        for j in range(150 + (i % 7) * 60)
    ]


def normal(i):
    correct = i % 3 != 0
    attempt = EvaluatedAttempt(attempt=1, correct=correct, score=float(correct), final_answer=f"answer-{i}",
                               trajectory=trajectory(i))
    return TaskDetail(task_id=f"t{i:05d}", category="c", attempts={"1": attempt}, attempts_tried=1,
                      correct=correct, score=float(correct))


def error(i):
    attempt = EvaluatedAttempt(attempt=1, status="error", run_error="boom", trajectory=trajectory(i))
    return TaskDetail(task_id=f"t{i:05d}", category="c", attempts={"1": attempt}, attempts_tried=1, error="boom")


writes = total = 0
for i in range(k * RANGE, (k + 1) * RANGE):
    if fsize_after is not None and total >= fsize_after:
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it by default
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        fsize_after = None
    if i % 5 == 0:
        assert run_dir.save_detail(error(i)) is not None
        writes += 1
        total += 1
    if i % 10 == 2:
        assert run_dir.save_detail(normal(i - 2)) is not None
        writes += 1
        total += 1
    if i % 5 != 0:
        assert run_dir.save_detail(normal(i)) is not None
        writes += 1
        total += 1
    if writes >= 25:
        writes = 0
        print("done", i, flush=True)
print("finished", flush=True)
"""


def _trajectory_len(i: int) -> int:
    return 150 + (i % 7) * 60


def _start_writer(results_dir: Path, k: int, existing: Path | None, fsize_after: int | None) -> subprocess.Popen[str]:
    args = [str(results_dir), str(k), str(existing or "-"), str(RANGE), str(WRITERS), str(fsize_after or "-")]
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, *args, str(FSIZE_LIMIT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=results_dir.parent,
    )


def _read_dir_line(proc: subprocess.Popen[str]) -> Path:
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline().split()
    assert first[:1] == ["dir"], (first, proc.stderr.read())
    return Path(first[1])


def _kill_mid_stream(proc: subprocess.Popen[str]) -> int:
    """Let a started writer report PROGRESS_LINES_BEFORE_KILL progress lines, then SIGKILL it mid-stream.
    Returns the last index it reported done."""
    try:
        done = -1
        for _ in range(PROGRESS_LINES_BEFORE_KILL):
            line = proc.stdout.readline().split()  # type: ignore[union-attr]
            assert line[:1] == ["done"], (line, proc.stderr.read())  # type: ignore[union-attr]
            done = int(line[1])
        # Land the kill at a different point of the next save each time (dump, temp write, fsync, link).
        time.sleep(random.random() * 0.03)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stdin.close()  # type: ignore[union-attr]
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL, "the writer must have been killed mid-stream, not have finished"
    return done


def _wait_until_it_dies_mid_write(proc: subprocess.Popen[str], existing: Path) -> int:
    """A started writer that limits its own file size after FSIZE_AFTER_WRITES saves: the next detail
    kills it with SIGXFSZ inside os.write, half-way through a file. Returns the last index it reported
    done."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGXFSZ, (proc.returncode, err)
    lines = out.splitlines()
    assert lines[0] == f"dir {existing}"
    done = [int(line.split()[1]) for line in lines[1:] if line.startswith("done ")]
    assert done and "finished" not in lines
    return done[-1]


def _classify(details_dir: Path) -> tuple[dict[str, TaskDetail], dict[str, TaskDetail], list[str]]:
    """Normal and _error_ details on disk by task id, checking each parses and matches its file name;
    and the leftover temp files."""
    normals: dict[str, TaskDetail] = {}
    errors: dict[str, TaskDetail] = {}
    leftovers = []
    for path in sorted(details_dir.iterdir()):
        name = path.name
        if name.startswith("."):
            assert name.endswith(".tmp"), f"unexpected hidden file {name}"
            leftovers.append(name)
            continue
        assert name.endswith(".json"), f"unexpected file {name}"
        detail = TaskDetail.model_validate_json(path.read_bytes())  # complete: never a half-written file
        is_error = name.startswith("_error_")
        stem = name.removeprefix("_error_").removesuffix(".json")
        assert stem == f"{detail.task_id}_c", f"{name} holds task {detail.task_id}"
        assert detail.category == "c"
        i = int(detail.task_id[1:])
        assert len(detail.attempts["1"].trajectory) == _trajectory_len(i)
        assert detail.attempts["1"].trajectory[-1]["content"].startswith(f"step {_trajectory_len(i) - 1} of task {i}:")
        if is_error:
            assert detail.error == "boom" and i % 5 == 0
            errors[detail.task_id] = detail
        else:
            assert detail.error is None and i % 10 != 5  # never a success for a task that only failed
            assert detail.attempts["1"].final_answer == f"answer-{i}"
            assert detail.correct is (i % 3 != 0)
            normals[detail.task_id] = detail
    return normals, errors, leftovers


def test_killed_writers_lose_nothing_they_finished(tmp_path: Path) -> None:
    """R-STORE-6: writers SIGKILLed mid-stream, and one killed by SIGXFSZ half-way through writing a file,
    leave only complete details (each parses, matches its file name), keep every save they reported
    finished, and their temp files (one of them half-written) are never taken as results:
    load_all_details, load_details and `summary` count exactly the complete details."""
    results_dir = tmp_path / "results"
    # The first writer reserves the run directory; the others write into it beside it (disjoint task
    # ranges, as a run's workers do): their startups and fsyncs overlap instead of adding up. Each waits
    # for the others to have started (a line on its stdin), so none writes far past its kill point.
    first = _start_writer(results_dir, 0, None, None)
    run_path = _read_dir_line(first)
    killed = [first] + [_start_writer(results_dir, k, run_path, None) for k in range(1, KILLS)]
    dying = _start_writer(results_dir, KILLS, run_path, FSIZE_AFTER_WRITES)
    for proc in killed[1:]:
        assert _read_dir_line(proc) == run_path
    for proc in [*killed, dying]:
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    with ThreadPoolExecutor(WRITERS) as pool:
        died = pool.submit(_wait_until_it_dies_mid_write, dying, run_path)
        dones = list(pool.map(_kill_mid_stream, killed))
        done = died.result()
    done_through = [(k * RANGE, d) for k, d in enumerate(dones)] + [(KILLS * RANGE, done)]
    details_dir = run_path / "details"
    # It died half-way through a file: that half is a temp file (of its own range), never a result.
    half_written = [
        p
        for p in details_dir.glob(".*.tmp")
        if KILLS * RANGE <= int(re.search(r"t(\d{5})_c", p.name)[1]) < WRITERS * RANGE
    ]  # type: ignore[index]
    assert len(half_written) == 1, half_written
    assert half_written[0].stat().st_size == FSIZE_LIMIT
    # ... of a task past the last one it reported done
    match = re.fullmatch(r"\.(?:_error_)?t(\d{5})_c\.json\.\d+-\d+\.tmp", half_written[0].name)
    assert match and done < int(match[1]) < WRITERS * RANGE, half_written[0].name

    normals, errors, leftovers = _classify(details_dir)
    # One writer has at most one save in flight when killed: at most one temp file, and at most one task
    # whose success was linked in but whose stale _error_ file was not yet removed.
    assert 1 <= len(leftovers) <= WRITERS, leftovers
    both = set(normals) & set(errors)
    assert len(both) <= WRITERS, sorted(both)
    error_only = {task_id: d for task_id, d in errors.items() if task_id not in normals}

    # Nothing a writer reported finished is lost, and finished retries removed their _error_ file.
    for start, done in done_through:
        for i in range(start, done + 1):
            task_id = f"t{i:05d}"
            if i % 10 == 5:
                assert task_id in errors and task_id not in normals, task_id
            elif i % 10 == 0 and i + 2 > done:
                assert task_id in errors or task_id in normals, task_id
            else:
                assert task_id in normals and task_id not in errors, task_id

    # The loaders take exactly the complete details, a normal one over an _error_ one, no temp file.
    run_dir = RunDir(run_path)
    everything = run_dir.load_all_details()
    assert set(everything) == set(normals) | set(errors)
    assert len(everything) == len(normals) + len(error_only)
    for task_id, detail in everything.items():
        assert detail.is_error is (task_id not in normals)
        assert detail == (normals.get(task_id) or errors[task_id])

    tasks = [TaskSpec(id=f"t{i:05d}", category="c") for i in range(RANGE * WRITERS)]
    assert set(run_dir.load_details(tasks)) == set(normals)
    with_errors = run_dir.load_details(tasks, include_errors=True)
    assert set(with_errors) == set(normals) | set(error_only)
    assert all(with_errors[t].is_error is (t in error_only) for t in with_errors)

    # `summary` re-renders from what survived: counts equal the complete details on disk.
    metrics, markdown = rerender_summary(run_path)
    counts = json.loads((run_path / ".summary_counts.json").read_text())
    correct = sum(d.correct for d in normals.values())
    assert counts["total"] == RANGE * WRITERS
    assert counts["evaluated"] == len(normals)
    assert counts["error"] == len(error_only)
    assert counts["missing"] == RANGE * WRITERS - len(normals) - len(error_only)
    assert counts["correct"] == correct
    assert counts["categories"]["c"]["total"] == len(normals) + len(error_only)
    assert metrics.metrics["accuracy"] == correct / len(normals)
    assert counts["metrics"]["accuracy"] == correct / len(normals)
    assert metrics.counts.evaluated == len(normals) and metrics.counts.error == len(error_only)
    assert (
        f"{len(normals)} evaluated · {correct} correct · {len(normals) - correct} wrong · 0 failed by the agent · "
        f"{len(error_only)} errors"
    ) in markdown
    assert (run_path / "summary.md").read_text() == markdown
    # Re-rendering reads only: the details and the leftovers are as they were.
    assert sorted(p.name for p in details_dir.iterdir() if p.name.startswith(".")) == leftovers


def _detail(task_id: str, answer: str, error: str | None = None) -> TaskDetail:
    attempt = EvaluatedAttempt(
        attempt=1,
        status="error" if error else "completed",
        correct=error is None,
        score=1.0 if error is None else 0.0,
        final_answer=answer,
        run_error=error,
        trajectory=[{"type": "message", "content": f"{answer} " * 2000}],
    )
    return TaskDetail(
        task_id=task_id,
        category="c",
        attempts={"1": attempt},
        correct=error is None,
        score=attempt.score,
        error=error,
    )


def test_racing_writers_of_one_task_leave_one_complete_winner(tmp_path: Path) -> None:
    """R-STORE-6 concurrency: two writers saving different normal details for the same task id at the
    same moment leave exactly one file, a complete copy of one of the two; the winner gets its path and
    the loser None, and the winner's file is never overwritten."""
    run_dir = RunStore(tmp_path / "results").reserve(tmp_path / "results" / "race" / "bench" / "model", None)
    rounds = 40
    barrier = threading.Barrier(2)
    returned: dict[tuple[int, str], object] = {}

    def writer(version: str) -> None:
        for r in range(rounds):
            detail = _detail(f"task-{r:03d}", f"{version}-{r}")
            barrier.wait()
            returned[(r, version)] = run_dir.save_detail(detail)

    threads = [threading.Thread(target=writer, args=(v,)) for v in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(p.name for p in run_dir.details_dir.iterdir()) == [f"task-{r:03d}_c.json" for r in range(rounds)]
    for r in range(rounds):
        path = run_dir.details_dir / f"task-{r:03d}_c.json"
        on_disk = TaskDetail.model_validate_json(path.read_bytes())
        winners = [v for v in ("A", "B") if returned[(r, v)] is not None]
        losers = [v for v in ("A", "B") if returned[(r, v)] is None]
        assert len(winners) == 1 and len(losers) == 1, (r, returned[(r, "A")], returned[(r, "B")])
        assert returned[(r, winners[0])] == path
        assert on_disk == _detail(f"task-{r:03d}", f"{winners[0]}-{r}")

    # A later normal save never replaces the first one either.
    assert run_dir.save_detail(_detail("task-000", "late")) is None
    assert (
        TaskDetail.model_validate_json((run_dir.details_dir / "task-000_c.json").read_bytes())
        .attempts["1"]
        .final_answer
        != "late"
    )


def test_racing_writer_processes_of_one_task_leave_one_complete_winner(tmp_path: Path) -> None:
    """R-STORE-6 concurrency across processes: two processes save different normal details for the same
    task ids, released together; each id ends with exactly one complete file, from the process that was
    told it won, and the other process got None."""
    run_dir = RunStore(tmp_path / "results").reserve(tmp_path / "results" / "race" / "bench" / "model", None)
    script = r"""
import sys
from pathlib import Path
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.contracts.records import EvaluatedAttempt
from agentcompass_dagster.runtime.store.outcomes import TaskDetail
run_dir, version = RunDir(Path(sys.argv[1])), sys.argv[2]
print("ready", flush=True)
if sys.stdin.readline() != "go\n":  # released by the test, or ended with it
    sys.exit("no go from the test")
for r in range(20):
    answer = f"{version}-{r}"
    detail = TaskDetail(task_id=f"task-{r:03d}", category="c", correct=True, score=1.0,
        attempts={"1": EvaluatedAttempt(attempt=1, correct=True, score=1.0, final_answer=answer,
                                         trajectory=[{"type": "message", "content": f"{answer} " * 2000}])})
    print(r, "won" if run_dir.save_detail(detail) is not None else "lost", flush=True)
"""
    procs = {
        v: subprocess.Popen(
            [sys.executable, "-c", script, str(run_dir.path), v],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for v in ("A", "B")
    }
    for proc in procs.values():
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outcomes: dict[str, dict[int, str]] = {}
    for v, proc in procs.items():
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        outcomes[v] = {int(r): verdict for r, verdict in (line.split() for line in out.splitlines())}

    assert sorted(p.name for p in run_dir.details_dir.iterdir()) == [f"task-{r:03d}_c.json" for r in range(20)]
    for r in range(20):
        assert sorted([outcomes["A"][r], outcomes["B"][r]]) == ["lost", "won"], r
        winner = "A" if outcomes["A"][r] == "won" else "B"
        on_disk = TaskDetail.model_validate_json((run_dir.details_dir / f"task-{r:03d}_c.json").read_bytes())
        assert on_disk.attempts["1"].final_answer == f"{winner}-{r}"
        assert on_disk.attempts["1"].trajectory[0]["content"] == f"{winner}-{r} " * 2000


def test_error_never_shadows_a_result_and_success_clears_the_error(tmp_path: Path) -> None:
    """R-STORE-6: an error detail saved after a normal one is refused (None) and leaves no _error_ file;
    a normal detail saved after an error one is written and removes the stale _error_ file."""
    run_dir = RunStore(tmp_path / "results").reserve(tmp_path / "results" / "order" / "bench" / "model", None)
    details = run_dir.details_dir

    # normal first, then an error for the same task
    first = run_dir.save_detail(_detail("done", "ok"))
    assert first == details / "done_c.json"
    assert run_dir.save_detail(_detail("done", "x", error="boom")) is None
    assert sorted(p.name for p in details.iterdir()) == ["done_c.json"]
    assert run_dir.load_detail(TaskSpec(id="done", category="c"), include_errors=True) == _detail("done", "ok")

    # error first, then a success for the same task
    error_path = run_dir.save_detail(_detail("flaky", "x", error="boom"))
    assert error_path == details / "_error_flaky_c.json"
    assert run_dir.load_details([TaskSpec(id="flaky", category="c")]) == {}
    assert run_dir.load_details([TaskSpec(id="flaky", category="c")], include_errors=True)["flaky"].is_error
    # a second error replaces the first error (an error file is not a result)
    assert run_dir.save_detail(_detail("flaky", "y", error="boom again")) == error_path
    assert TaskDetail.model_validate_json(error_path.read_bytes()).error == "boom again"
    assert run_dir.save_detail(_detail("flaky", "ok")) == details / "flaky_c.json"
    assert not error_path.exists()
    assert sorted(p.name for p in details.iterdir()) == ["done_c.json", "flaky_c.json"]
    assert {t: d.is_error for t, d in run_dir.load_all_details().items()} == {"done": False, "flaky": False}
