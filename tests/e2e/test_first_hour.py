"""What a newcomer's mistakes get: one line naming the file, the field and the value (with the nearest
known name for a near miss), exit code 2, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, write_sweep


def _refused(args: tuple[object, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    capsys.readouterr()
    assert run_cli(*map(str, args)) == 2, args
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before, "something was written"
    return err


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"harness": "oracel"}, "harness='oracel': no declaration "),
        ({"environment": "locl"}, "environment='locl': no declaration "),
        ({"benchmarks": [{"id": "dem"}]}, "benchmarks[0].id='dem': unknown benchmark; did you mean 'demo'?"),
        ({"benchmarks": [{"id": "zzz"}]}, "benchmarks[0].id='zzz': unknown benchmark (known: demo,"),
        (
            {"execution": {"limits": {"attempt_timout_s": 5}}},
            "execution.limits.attempt_timout_s=5: not a field here; did you mean 'attempt_timeout_s'?",
        ),
        ({"execution": {"attempts": {"kk": 2}}}, "execution.attempts.kk=2: not a field here"),
    ],
)
def test_a_near_miss_names_the_file_the_field_and_the_nearest_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, object], expected: str
) -> None:
    """Unknown plugin ids and misspelled fields are refused when the sweep loads, before any plugin is
    imported: the message starts with the sweep file and suggests the nearest known name."""
    sweep = write_sweep(tmp_path, **fields)
    err = _refused(("run", sweep, "--direct"), tmp_path, capsys)
    assert err.startswith(f"agentcompass: error: {sweep}: {expected}"), err
    if "no declaration" in expected:
        assert err.rstrip().endswith(("did you mean 'oracle'?", "did you mean 'local'?")), err


def test_an_unknown_environment_name_is_one_line_naming_where_it_was_looked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #30: an environment name declared nowhere and no plugin's id is refused, exit 2, naming the
    sweep file, the field, the value, each place looked in and the nearest name; before, it fell back to
    the plugin's defaults without a word."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "resources" / "sweeps").mkdir(parents=True)
    (tmp_path / "resources" / "environments").mkdir()
    (tmp_path / "resources" / "environments" / "sandbox.yaml").write_text("id: sandbox\nprovider: sandbox\n")
    sweep = write_sweep(tmp_path / "resources" / "sweeps", name="s", environment="sandbx")
    err = _refused(("run", sweep, "--direct"), tmp_path, capsys)
    assert err == (
        f"agentcompass: error: {sweep}: environment='sandbx': no declaration "
        f"{tmp_path / 'resources' / 'environments' / 'sandbx.yaml'} and no environment plugin of that id; "
        "did you mean 'sandbox'?\n"
    ), err


def test_a_name_declared_in_the_project_resources_is_used_with_its_params(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #30: a sweep outside resources/ finds the names it does not declare beside it in the
    project's resources/<kind>/ (one beside it wins), params and all, not the plugin's defaults."""
    from agentcompass_dagster.declarations.sweep import load_sweep

    monkeypatch.chdir(tmp_path)
    (tmp_path / "resources" / "sweeps").mkdir(parents=True)
    (tmp_path / "resources" / "environments").mkdir()
    (tmp_path / "resources" / "environments" / "box.yaml").write_text(
        "id: box\nprovider: sandbox\nparams: {memory_mb: 1234, max_processes: 77}\n"
    )
    (tmp_path / "resources" / "harnesses").mkdir()
    (tmp_path / "resources" / "harnesses" / "oracle.yaml").write_text("id: oracle\nparams: {where: project}\n")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "harnesses").mkdir(parents=True)
    (elsewhere / "harnesses" / "oracle.yaml").write_text("id: oracle\nparams: {where: beside}\n")
    sweep = load_sweep(write_sweep(elsewhere, environment="box"))
    (request,) = sweep.requests()
    assert request.environment.provider_id == "sandbox"
    assert request.environment.params == {"memory_mb": 1234, "max_processes": 77}
    assert request.harness.params == {"where": "beside"}


@pytest.mark.parametrize("mode", [("--direct",), ()])
@pytest.mark.parametrize(
    ("inline", "expected"),
    [
        (False, "harness.params.keep_recent_messages=1: Input should be greater than or equal to 2"),
        (True, "model.params.turnz={}: not a field here; did you mean 'turns'?"),
    ],
)
def test_a_bad_plugin_param_names_the_file_it_is_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: tuple[str, ...], inline: bool, expected: str
) -> None:
    """#30: a bad param of a plugin, which only the plugin validates once built, is one line naming the file
    it is in (the harness's own harnesses/NAME.yaml; the sweep, for a model declared inline in it), the
    field and the value, exit 2, nothing written; so through Dagster, whose preflight builds the plugins
    before anything is launched, as with --direct."""
    (tmp_path / "harnesses").mkdir()
    declared = tmp_path / "harnesses" / "careful.yaml"
    declared.write_text("id: tool_agent\nparams: {keep_recent_messages: %d}\n" % (2 if inline else 1))
    model = {"id": "m", "provider": "scripted", "params": {"turnz" if inline else "turns": {}}}
    sweep = write_sweep(tmp_path, models=[model], harness="careful")
    err = _refused(("run", sweep, *mode), tmp_path, capsys)
    assert err == f"agentcompass: error: {sweep if inline else declared}: {expected}\n", err


def test_a_results_dir_that_is_a_file_is_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """output.results_dir naming a file (or a path through one) says "not a directory", not "File exists"."""
    (tmp_path / "taken").write_text("a file\n")
    for results in (tmp_path / "taken", tmp_path / "taken" / "below"):
        sweep = write_sweep(tmp_path, output={"results_dir": str(results)})
        err = _refused(("run", sweep, "--direct"), tmp_path, capsys)
        assert f"output.results_dir={str(results)!r}: not a directory" in err, err


@pytest.mark.parametrize("command", ["summary", "resume"])
def test_a_missing_run_directory_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """`summary` and `resume` of a path that is not there, a file, or a directory without run_info.json
    say which of the three it is."""
    (tmp_path / "file").write_text("x\n")
    (tmp_path / "empty").mkdir()
    for name, message in (("nowhere", "does not exist"), ("file", "not a directory"), ("empty", "not a run directory")):
        err = _refused((command, tmp_path / name), tmp_path, capsys)
        assert f"RUN_DIR={str(tmp_path / name)!r}: {message}" in err, err


def test_dispatch_keeps_its_runs_under_the_results_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec without runs_dir writes its run to results/dispatch/ of the working directory, beside the
    sweeps' (git-ignored) results, not to a new directory at the top of the repository."""
    import yaml

    from agentcompass_dagster.dispatch import run_dispatch

    model = {
        "id": "scripted",
        "provider": "scripted",
        "params": {"turns": {"dispatch": [{"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]}]}},
    }
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"prompt": "Say done.", "model": model, "run_id": "r1"}))
    monkeypatch.chdir(tmp_path)
    receipt, code = run_dispatch(spec)
    assert code == 0, receipt
    assert Path(receipt["runDir"]) == tmp_path / "results" / "dispatch" / "r1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "spec.yaml"]


def _on_a_terminal(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``command`` with a pseudo-terminal as its stdin, stdout and stderr: its exit code and all it
    wrote (read until the terminal closes, so nothing is lost to timing)."""
    import os
    import pty
    import subprocess

    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    output = b""
    try:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(leader)
    return proc.wait(timeout=120), output.decode(errors="replace")


def test_the_installed_command_runs_its_demo_from_an_empty_directory(tmp_path: Path) -> None:
    """`agentcompass run` with no argument, in a directory with no resources/ of its own, runs the
    packaged demo sweep through Dagster: 18 tasks, accuracy 1.0, results and the instance made here, and
    says what its Dagster run was for; run again, it launches nothing and says so first.

    The first run is on a terminal, so the same sweep also shows the live progress display: tasks done,
    the runs in flight, errors and the rate while the sweep's runs execute (from the events they record
    as each task ends). One sweep for both, since each costs 20-40 s under CI's load; that piped output
    has no progress lines is asserted on the README's first `agentcompass run` (test_readme)."""
    import os
    import subprocess
    import sys

    command = Path(sys.executable).parent / "agentcompass"
    env = {key: value for key, value in os.environ.items() if key != "DAGSTER_HOME"}
    code, text = _on_a_terminal([str(command), "run"], tmp_path, {**env, "COLUMNS": "160"})
    assert code == 0, text[-2000:]
    assert "demo/none" in text and "runs in flight" in text and "errors" in text and "tasks/s" in text, text[-2000:]
    assert "18/18" in text
    assert "Tasks: 18 selected · 18 evaluated · 18 correct" in text, text[-2000:]
    assert "| accuracy | 1.0000 |" in text
    assert (tmp_path / "results" / "demo" / "demo" / "none").is_dir() and (tmp_path / ".dagster").is_dir()
    assert "launched 1 run(s) evaluating the 18 (model, task) partition(s) without a result" in text
    # Run again: nothing runs, and the summary reprinted is said to be the earlier run's.
    again = subprocess.run([str(command), "run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.startswith("Nothing to run: every task has a result"), again.stdout[:500]
    assert "dagster: nothing launched" in again.stdout


def test_with_several_attempts_the_summary_says_what_correct_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task is "correct" when any attempt was, while accuracy averages the attempts: with k=2, one
    attempt right and one wrong per task, the summary says "2 correct (by at least one attempt)" and
    counts the attempts (2 of 4) beside accuracy 0.5, instead of "2 correct" beside 0.5 unexplained."""
    steps = [{"oracle": True}, {"answer": "no"}]
    sweep = write_sweep(
        tmp_path,
        benchmarks=[{"id": "demo", "tasks": ["create-hello", "fix-calc"]}],
        harness={"id": "scripted", "params": {"tasks": {"create-hello": steps, "fix-calc": steps}}},
        execution={"attempts": {"k": 2}},
    )
    assert run_cli("run", sweep, "--direct") == 0
    out = capsys.readouterr().out
    assert "2 correct (by at least one attempt)" in out, out
    assert "Attempts: 4 run · 2 correct" in out and "| accuracy | 0.5000 |" in out, out
    assert "2 run in this run · 0 reused from earlier runs" in out, out


def test_show_lists_attempts_the_checkpoints_a_fork_accepts_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agentcompass show RUN_DIR` names each task's state and attempts, the checkpoints of an agent
    attempt with those a fork accepts (a fork at one of them runs; at one not marked forkable it is
    refused), its replays and a fork's lineage; it changes nothing in the run directory (R-FORK-1)."""
    import json
    import shutil

    from conftest import tree_snapshot
    from scripted_agent import SOLUTION, bash, submit, sweep_file

    turns = {"count-errors": [bash("echo draft > draft.txt"), bash(SOLUTION), submit()]}
    models = [
        {"id": "solver-a", "provider": "scripted", "params": {"turns": turns}},
        {"id": "solver-b", "provider": "scripted", "params": {"turns": {"count-errors": [submit()] * 3}}},
    ]
    assert run_cli("run", sweep_file(tmp_path, turns, models=models[:1]), "--direct") == 0
    run_dir = next((tmp_path / "results").rglob("run_info.json")).parent
    assert run_cli("replay", run_dir, "--task", "count-errors") == 0
    before = tree_snapshot(run_dir)
    capsys.readouterr()
    assert run_cli("show", run_dir, "--task", "count-errors", "--json") == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert tree_snapshot(run_dir) == before, "show changed the run directory"
    (attempt,) = task["attempts"]
    assert (task["state"], attempt["outcome"], task["score"]) == ("finished", "correct", 1.0)
    assert [(r["attempt"], r["status"]) for r in task["replays"]] == [(1, "matched")]
    forkable = [c["seq"] for c in attempt["checkpoints"] if c["forkable"]]
    others = [c["seq"] for c in attempt["checkpoints"] if not c["forkable"]]
    assert len(forkable) == 2, attempt["checkpoints"]  # after each bash turn; the submit ends the attempt
    both = sweep_file(tmp_path, turns, name="both", models=models)
    fork = ("fork", run_dir, "--task", "count-errors", "--model", "solver-b", "--sweep", both, "--checkpoint")
    assert run_cli(*fork, forkable[0]) == 0
    for seq in others:
        assert run_cli(*fork, seq) == 2

    assert run_cli("show", run_dir) == 0
    out = capsys.readouterr().out
    first, second = forkable
    which = f"checkpoints {first}–{second}" if second == first + 1 else f"checkpoints {first}, {second}"
    assert f"| count-errors | finished | 1.0000 | 1: correct | attempt 1, {which} | 1 |" in out, out
    assert "| a fork can start from |" in out
    fork_dir = next(p.parent for p in (tmp_path / "results").rglob("run_info.json") if ".forks" in str(p))
    assert run_cli("show", fork_dir) == 0
    assert (
        f"lineage: fork of run {run_dir.name} (task count-errors, attempt 1, checkpoint {forkable[0]}"
        in capsys.readouterr().out
    )

    # After a crash: the task without a detail is unfinished, its agent attempt interrupted.
    crashed = tmp_path / "crashed"
    shutil.copytree(run_dir, crashed, symlinks=True)
    for detail in (crashed / "details").glob("*.json"):
        detail.unlink()
    assert run_cli("show", crashed, "--json") == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert (task["state"], [a["outcome"] for a in task["attempts"]]) == ("unfinished", ["interrupted"])
    assert run_cli("show", run_dir, "--task", "nope") == 2


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("best", "execution.attempts.strategy='best': not one of avg, pass"),
        ("pas", "execution.attempts.strategy='pas': not one of avg, pass; did you mean 'pass'?"),
    ],
)
def test_an_unknown_strategy_is_refused_when_the_sweep_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str, expected: str
) -> None:
    """R-RETRY-1: execution.attempts.strategy is one of the registered strategies; another is refused
    when the sweep loads, naming the file, the field, the value and the allowed ones."""
    sweep = write_sweep(tmp_path, execution={"attempts": {"k": 2, "strategy": strategy}})
    err = _refused(("run", sweep, "--direct"), tmp_path, capsys)
    assert err.strip() == f"agentcompass: error: {sweep}: {expected}", err


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        (
            ["create-hello", "fix-cal"],
            "benchmarks[1].tasks='fix-cal': no such task in benchmark 'demo'; did you mean 'fix-calc'?",
        ),
        (["nope"], "benchmarks[1].tasks='nope': no such task in benchmark 'demo'"),
    ],
)
def test_an_unknown_task_id_names_the_sweep_file_and_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tasks: list[str], expected: str
) -> None:
    """R-PREP-1: a declared task the benchmark does not have is refused before anything is written,
    naming the sweep file and benchmarks[<index>].tasks, with the nearest id for a near miss."""
    benchmarks = [{"id": "synthetic", "params": {"n_tasks": 2}}, {"id": "demo", "tasks": tasks}]
    sweep = write_sweep(tmp_path, benchmarks=benchmarks)
    err = _refused(("run", sweep, "--direct"), tmp_path, capsys)
    assert err.strip() == f"agentcompass: error: {sweep}: {expected}", err
