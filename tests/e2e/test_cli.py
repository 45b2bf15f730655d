"""The CLI: re-renders summaries, and answers bad input with one line, exit 2 (its embedded default sweep is run
by test_readme and test_first_hour)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcompass_dagster.runtime.store.outcomes import TaskDetail

from conftest import run_cli, run_cli_process, tree_snapshot, write_sweep, write_task


# `agentcompass run` with no argument in a fresh checkout (resources/sweeps/demo.yaml: the table and the run
# directory printed, the run below results/demo/demo/none) is asserted on the README's first command in
# test_readme.test_the_readme_run_commands_run_as_written: a second demo sweep here would cost 20-40 s
# under CI's load and check nothing more.


def test_summary_rerenders_from_details(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`agentcompass summary RUN_DIR` rebuilds summary.md and .summary_counts.json from details/ alone."""
    assert run_cli("run", write_sweep(tmp_path)) == 0
    (run_dir,) = (tmp_path / "results" / "sweep" / "demo" / "none").iterdir()
    original = (run_dir / "summary.md").read_text(), (run_dir / ".summary_counts.json").read_text()
    (run_dir / "summary.md").unlink()
    (run_dir / ".summary_counts.json").write_text("{}")
    assert run_cli("summary", run_dir) == 0
    assert ((run_dir / "summary.md").read_text(), (run_dir / ".summary_counts.json").read_text()) == original
    first = sorted((run_dir / "details").glob("*.json"))[0]
    failed = TaskDetail.model_validate_json(first.read_text()).model_copy(update={"error": "boom"})
    (first.parent / ("_error_" + first.name)).write_text(failed.model_dump_json())
    first.unlink()
    capsys.readouterr()
    assert run_cli("summary", run_dir) == 0
    counts = json.loads((run_dir / ".summary_counts.json").read_text())
    assert counts["evaluated"] == counts["total"] - 1 and counts["error"] == 1
    assert "1 errors" in capsys.readouterr().out


BAD_INPUTS = {
    "broken yaml": ({"raw": "name: x\nbenchmarks: [\n  - id: demo\n"}, "invalid YAML"),
    "unknown plugin": ({"harness": "nope"}, "harness='nope': no declaration"),
    "unknown field": ({"executon": {}}, "executon"),
    "wrong type": ({"execution": {"attempts": {"k": "three"}}}, "execution.attempts.k='three'"),
    "bad strategy": ({"execution": {"attempts": {"strategy": "best"}}}, "execution.attempts.strategy='best'"),
    "duplicate task id": ({"tasks": [("a", "same"), ("b", "same")]}, "id='same' is duplicated"),
    "escaping task id": ({"tasks": [("a", "../x")]}, "id='../x'"),
    "absolute task id": ({"tasks": [("a", "/etc")]}, "id='/etc'"),
    "control characters": ({"tasks": [("a", "a\x01b")]}, "control characters"),
    "unknown reuse_run_id": ({"output": {"reuse_run_id": "nope"}}, "output.reuse_run_id='nope'"),
    "unwritable results_dir": ({"output": {"results_dir": "FILE/results"}}, "output.results_dir="),
    "local refuses network switch": ({"execution": {"network": {"run": "none"}}}, "execution.network.run='none'"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_touches_nothing(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input: one line naming the field and the value, exit code 2, every existing file unchanged."""
    assert run_cli("run", write_sweep(tmp_path, name="good"), "--direct") == 0
    (tmp_path / "FILE").write_text("a file, not a directory")
    before = tree_snapshot(tmp_path)
    spec, expected = BAD_INPUTS[case]
    fields = dict(spec)
    if "raw" in fields:
        sweep = tmp_path / "bad.yaml"
        sweep.write_text(fields["raw"])
    else:
        if "tasks" in fields:
            for dirname, task_id in fields.pop("tasks"):
                write_task(tmp_path / "tasks", task_id, dirname=dirname)
            fields["benchmarks"] = [{"id": "demo", "params": {"tasks_dir": str(tmp_path / "tasks")}}]
        if "output" in fields:
            output = {"results_dir": str(tmp_path / "results"), **fields.pop("output")}
            output["results_dir"] = output["results_dir"].replace("FILE", str(tmp_path / "FILE"))
            fields["output"] = output
        sweep = write_sweep(tmp_path, name="good", **fields)
    before.pop("good.yaml")
    capsys.readouterr()
    assert run_cli("run", sweep) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    after = tree_snapshot(tmp_path)
    for name in ("good.yaml", "bad.yaml"):
        after.pop(name, None)
    after = {k: v for k, v in after.items() if not k.startswith("tasks/")}
    assert after == before


def test_user_mistake_in_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    """A missing sweep file, run as a real process: exit 2, one line on stderr, no traceback."""
    proc = run_cli_process("run", "missing.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "agentcompass: error: missing.yaml: no such file"


def test_run_takes_a_sweep_by_name(tmp_path: Path) -> None:
    """Issue #30: `agentcompass run NAME` runs resources/sweeps/NAME.yaml of the current directory (else
    the packaged one); an unknown name is one line naming it, the places looked in and the nearest known
    sweep (or, with none near, the known ones), exit 2 (issue #40)."""
    repo = Path(__file__).resolve().parents[2]
    proc = run_cli_process("run", "demo-nop", "--direct", "--results-dir", tmp_path / "results", cwd=repo)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "results" / "demo-nop" / "demo" / "none").is_dir()
    proc = run_cli_process("run", "demo-nopp", "--direct", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "agentcompass: error: sweep 'demo-nopp': no such file, and no resources/sweeps/demo-nopp.yaml "
        f"or {repo / 'agentcompass_dagster' / 'resources' / 'sweeps' / 'demo-nopp.yaml'}; "
        "did you mean 'demo-nop'?\n"
    )
    proc = run_cli_process("run", "zzz", "--direct", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.endswith(
        "; known sweeps: agent-clis, demo, demo-agent, demo-nop, harbor, humaneval, humaneval-samples\n"
    )
