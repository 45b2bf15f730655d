"""Third-party plugins through Python entry points (registry.py).

A package that is not part of this repository declares

    [project.entry-points."agentcompass.benchmarks"]
    tiny = "tiny_bench:TinyBenchmark"

is installed for real with pip into a folder of its own, and `agentcompass run` then finds the benchmark
by its id when that folder is on PYTHONPATH, and only then. Broken entry points are user errors: one line
on stderr naming the plugin id, exit code 2, no traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli, write_sweep

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

TINY_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-bench"
version = "0.1.0"
description = "A third-party benchmark for agentcompass, written by a test."

[project.entry-points."agentcompass.benchmarks"]
tiny = "tiny_bench:TinyBenchmark"

[tool.setuptools]
packages = ["tiny_bench"]
"""

TINY_INIT = '''\
"""Four arithmetic questions; the reference solution answers them, evaluate compares the answer."""

from agentcompass_dagster.contracts.benchmark import Benchmark, ReferenceSolution
from agentcompass_dagster.contracts.records import Evaluation, TaskSpec


class TinyBenchmark(Benchmark):
    def load_tasks(self):
        return [
            TaskSpec(
                id=f"q{i}",
                category="even" if i % 2 == 0 else "odd",
                input=f"What is {i} squared?",
                metadata={"expected": str(i * i)},
            )
            for i in range(4)
        ]

    def reference_solution(self, task):
        return ReferenceSolution(answer=task.metadata["expected"])

    async def evaluate(self, prepared, result, session):
        correct = (result.final_answer or "").strip() == prepared.task.metadata["expected"]
        return Evaluation(correct=correct, score=float(correct))
'''

TINY_TASKS = {"q0": ("even", "0"), "q1": ("odd", "1"), "q2": ("even", "4"), "q3": ("odd", "9")}

BROKEN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "broken-bench"
version = "0.1.0"

[project.entry-points."agentcompass.benchmarks"]
ghost = "no_such_plugin_module_1f3a:GhostBenchmark"
noattr = "broken_bench:NoSuchBenchmark"
needsdep = "broken_bench.needs_dep:NeedsDepBenchmark"
syntaxerr = "broken_bench.syntax_error:SyntaxBenchmark"

[tool.setuptools]
packages = ["broken_bench"]
"""

BROKEN_FILES = {
    "broken_bench/__init__.py": '"""A plugin package whose entry points all point at something unusable."""\n',
    "broken_bench/needs_dep.py": (
        "import not_installed_dependency_9c2e  # noqa: F401\n\n\nclass NeedsDepBenchmark:\n    pass\n"
    ),
    "broken_bench/syntax_error.py": "class SyntaxBenchmark(:\n    pass\n",
}


# --- installing a package for real -------------------------------------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env.update(extra)
    return env


def _pip_install(pkgdir: Path, site: Path) -> subprocess.Popen[str]:
    """`pip install --no-deps --target site pkgdir`, started: a real build (in pip's isolated build
    environment) and install, outside the venv."""
    return subprocess.Popen(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(site), str(pkgdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_clean_env(),
    )


def _write_package(root: Path, pyproject: str, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(pyproject)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


PACKAGES = {"tiny": (TINY_PYPROJECT, {"tiny_bench/__init__.py": TINY_INIT}), "broken": (BROKEN_PYPROJECT, BROKEN_FILES)}


def _install_both(base: Path) -> None:
    """Both packages built and installed into base/<name>/site, the two pips at once (most of a pip's
    time is setting up its isolated build environment, mostly waiting, so they overlap well); base/done
    marks that both succeeded."""
    started = {}
    for name, (pyproject, files) in PACKAGES.items():
        pkgdir = _write_package(base / name / "src", pyproject, files)
        started[name] = _pip_install(pkgdir, base / name / "site")
    for name, proc in started.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"pip install of the {name} package failed:\n{out}"
    (base / "done").touch()


@pytest.fixture(scope="session")
def plugin_sites(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Path]:
    """The two packages installed once for the whole session, shared by every xdist worker: a pip install
    costs ~15 s under CI's load, and with `-n 2` these tests land on both workers, so a module-scoped
    install ran once per worker and package. The first worker to get here installs under a lock in the
    directory all workers' temporary directories share; the others wait on the lock and reuse it. A test
    only puts the installed folders on a subprocess's PYTHONPATH and never writes to them, so sharing
    them leaves every test independent of the others' effects."""
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # pytest-of-<user>/pytest-N: the parent of each worker's popen-gwN
    base = root / "agentcompass-plugin-packages"
    with open(root / "agentcompass-plugin-packages.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (base / "done").exists():
            if base.exists():
                shutil.rmtree(base)  # a worker that failed half-way: start again
            _install_both(base)
    return {name: base / name / "site" for name in PACKAGES}


@pytest.fixture
def tiny_site(plugin_sites: dict[str, Path]) -> Path:
    return plugin_sites["tiny"]


@pytest.fixture
def broken_site(plugin_sites: dict[str, Path]) -> Path:
    return plugin_sites["broken"]


# --- running the CLI ------------------------------------------------------------------------------------


def _sweep(directory: Path, benchmark_id: str, name: str = "plugsweep") -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "benchmarks": [{"id": benchmark_id}],
                "models": ["none"],
                "harness": "oracle",
                "environment": "local",
                "output": {"results_dir": str(directory / "results")},
            },
            sort_keys=False,
        )
    )
    return path


def _run(sweep: Path, cwd: Path, site: Path | None) -> subprocess.CompletedProcess[str]:
    env = _clean_env(PYTHONPATH=str(site)) if site is not None else _clean_env()
    return subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(sweep)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# --- tests ----------------------------------------------------------------------------------------------


def test_pip_installs_the_plugin_with_its_entry_point(tiny_site: Path) -> None:
    """The plugin lands in its own folder, outside the venv, with the entry point in its metadata."""
    assert (tiny_site / "tiny_bench" / "__init__.py").is_file()
    entry_point_files = list(tiny_site.glob("tiny_bench-*.dist-info/entry_points.txt"))
    assert len(entry_point_files) == 1
    text = entry_point_files[0].read_text()
    assert "[agentcompass.benchmarks]" in text
    assert re.search(r"^tiny\s*=\s*tiny_bench:TinyBenchmark\s*$", text, re.MULTILINE)
    # It is not in the venv: without PYTHONPATH it cannot be imported.
    probe = subprocess.run(
        [sys.executable, "-c", "import tiny_bench"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        cwd=tiny_site.parent,
    )
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr


def test_entry_point_benchmark_runs_end_to_end(tiny_site: Path, tmp_path: Path) -> None:
    """A benchmark registered only by an installed package's entry point is run by `agentcompass run`:
    one detail per task under <results>/<sweep>/tiny/none/<run_id>/details, all correct."""
    sweep = _sweep(tmp_path, "tiny")
    proc = _run(sweep, tmp_path, tiny_site)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr

    model_root = tmp_path / "results" / "plugsweep" / "tiny" / "none"
    run_dirs = [p for p in model_root.iterdir() if p.is_dir()]
    assert len(run_dirs) == 1, run_dirs
    run_dir = run_dirs[0]
    assert f"run directory: {run_dir}" in proc.stdout

    details = run_dir / "details"
    names = sorted(p.name for p in details.iterdir())
    assert names == sorted(f"{task}_{cat}.json" for task, (cat, _) in TINY_TASKS.items())
    for task_id, (category, expected) in TINY_TASKS.items():
        detail = TaskDetail.model_validate_json((details / f"{task_id}_{category}.json").read_bytes())
        assert detail.task_id == task_id
        assert detail.category == category
        assert detail.error is None
        assert detail.correct is True and detail.score == 1.0
        assert detail.attempts["1"].final_answer == expected

    counts = json.loads((run_dir / ".summary_counts.json").read_text())
    assert counts["total"] == 4
    assert counts["evaluated"] == 4
    assert counts["correct"] == 4
    assert counts["error"] == 0
    assert counts["missing"] == 0
    assert counts["metrics"]["accuracy"] == 1.0
    assert {name: (c["total"], c["correct"]) for name, c in counts["categories"].items()} == {
        "even": (2, 2),
        "odd": (2, 2),
    }
    run_info = json.loads((run_dir / "run_info.json").read_text())
    assert run_info["status"] == "completed"
    assert run_info["request"]["benchmark"]["id"] == "tiny"
    assert run_info["selected_tasks"] == ["q0", "q1", "q2", "q3"]
    assert "tiny · none · oracle" in (run_dir / "summary.md").read_text()


def test_without_the_plugin_on_the_path_the_id_is_unknown(tmp_path: Path) -> None:
    """The same sweep without the plugin folder on PYTHONPATH: exit 2, one stderr line naming the sweep
    file and benchmarks[0].id='tiny' as an unknown benchmark, no traceback, nothing written. (It needs
    no install: the package is never in the venv, test_pip_installs_the_plugin_with_its_entry_point shows,
    and waiting for the shared install would only hold this test up.)"""
    sweep = _sweep(tmp_path, "tiny")
    proc = _run(sweep, tmp_path, None)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"{sweep}: benchmarks[0].id='tiny'" in lines[0]
    assert "unknown benchmark" in lines[0]
    assert not (tmp_path / "results" / "plugsweep").exists()


@pytest.mark.parametrize(
    ("plugin_id", "target", "reason"),
    [
        ("ghost", "no_such_plugin_module_1f3a:GhostBenchmark", "No module named 'no_such_plugin_module_1f3a'"),
        ("noattr", "broken_bench:NoSuchBenchmark", "NoSuchBenchmark"),
        ("needsdep", "broken_bench.needs_dep:NeedsDepBenchmark", "No module named 'not_installed_dependency_9c2e'"),
        ("syntaxerr", "broken_bench.syntax_error:SyntaxBenchmark", "syntax"),
    ],
)
def test_entry_point_that_cannot_be_imported_is_a_user_error(
    broken_site: Path, tmp_path: Path, plugin_id: str, target: str, reason: str
) -> None:
    """An entry point whose target cannot be imported: exit 2 and one stderr line that names the plugin
    id, its target and why, never a traceback; no run directory is reserved."""
    sweep = _sweep(tmp_path, plugin_id)
    proc = _run(sweep, tmp_path, broken_site)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("agentcompass: error: ")
    assert f"benchmark.id={plugin_id!r}" in line
    assert "cannot be loaded" in line
    assert repr(target) in line
    assert reason.lower() in line.lower()
    assert not (tmp_path / "results" / "plugsweep").exists()


def test_broken_entry_points_do_not_hide_working_ones(broken_site: Path, tiny_site: Path, tmp_path: Path) -> None:
    """Broken entry points of one installed package only matter when chosen: a sweep of the working
    plugin beside them still runs, and `unknown benchmark` lists the ids of both packages."""
    both = os.pathsep.join([str(tiny_site), str(broken_site)])
    env = _clean_env(PYTHONPATH=both)
    ok = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(_sweep(tmp_path, "tiny", "ok"))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    counts = json.loads(
        next((tmp_path / "results" / "ok" / "tiny" / "none").glob("*/.summary_counts.json")).read_text()
    )
    assert counts["correct"] == 4

    bad = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(_sweep(tmp_path, "nosuch", "bad"))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2, bad.stdout + bad.stderr
    line = bad.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    known = line.split("(known: ", 1)[1].rstrip(")").split(", ")
    assert {"tiny", "ghost", "noattr", "needsdep", "syntaxerr", "demo", "synthetic"} <= set(known)


# --- contracts -------------------------------------------------------------------------------------


def _self_running_benchmark() -> type:
    from agentcompass_dagster.contracts import HarnessFreeBenchmark
    from agentcompass_dagster.contracts.records import Evaluation, RunResult, TaskSpec

    class SelfRunning(HarnessFreeBenchmark):
        """Runs each task itself: a command in the task's environment, whose output is the answer."""

        def load_tasks(self) -> list[TaskSpec]:
            return [TaskSpec(id="a", input="x"), TaskSpec(id="b", input="y")]

        async def run_task(self, prepared: Any, session: Any, plan: Any) -> RunResult:
            out = await session.exec(f"echo ran-{prepared.task.id}")
            return RunResult(final_answer=out.stdout.strip())

        async def evaluate(self, prepared: Any, result: RunResult, session: Any) -> Evaluation:
            correct = result.final_answer == f"ran-{prepared.task.id}"
            return Evaluation(correct=correct, score=float(correct))

    return SelfRunning


def test_a_harness_free_benchmark_runs_through_the_none_harness(
    tmp_path: Path, plugin_registries: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """R-ATT-2: a benchmark that runs its tasks itself is declared with harness `none`, and runs inside
    the harness boundary like any other (its run_task is the session's run); any other harness is
    refused for it, and `none` is refused for a benchmark that needs a harness."""
    registry.benchmarks.register("self-running", _self_running_benchmark())
    sweep = write_sweep(tmp_path, benchmarks=[{"id": "self-running"}], harness="none")
    assert run_cli("run", sweep, "--direct") == 0
    assert "Tasks: 2 selected · 2 evaluated · 2 correct" in capsys.readouterr().out
    other = write_sweep(tmp_path, name="other", benchmarks=[{"id": "self-running"}], harness="oracle")
    assert run_cli("run", other, "--direct") == 2
    assert (
        "harness.id='oracle': benchmark 'self-running' is harness-free: declare harness none" in capsys.readouterr().err
    )
    demo = write_sweep(tmp_path, name="demo-none", harness="none")
    assert run_cli("run", demo, "--direct") == 2
    assert "harness.id='none': benchmark 'demo' needs a harness" in capsys.readouterr().err


def test_a_plugin_that_does_not_subclass_its_contract_is_refused(
    tmp_path: Path, plugin_registries: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """A class registered as a harness that is not a contracts.Harness is refused in one line naming the
    id and the contract, before anything runs."""

    class NotAHarness:
        pass

    registry.harnesses.register("impostor", NotAHarness)
    sweep = write_sweep(tmp_path, harness="impostor")
    assert run_cli("run", sweep, "--direct") == 2
    err = capsys.readouterr().err
    assert (
        "harness.id='impostor': the harness plugin" in err
        and "is not a subclass of agentcompass_dagster.contracts.harness.Harness" in err
    ), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "results").exists()


# --- ids declared twice ----------------------------------------------------------------------------


def _distribution(site: Path, name: str, entry_points: str) -> None:
    """What pip leaves of a package for importlib.metadata: its dist-info, nothing to import."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.mark.parametrize(
    ("distributions", "expected"),
    [
        (
            {"foo": "[agentcompass.harnesses]\ntool_agent = foo_pkg.mod:Cls\n"},
            "harness id 'tool_agent' is declared by entry point 'tool_agent = foo_pkg.mod:Cls' "
            "(distribution foo 1.0) and built in as agentcompass_dagster.plugins.harnesses.tool_agent:ToolAgentHarness",
        ),
        (
            {
                "foo": "[agentcompass.benchmarks]\nmine = foo_pkg:Mine\n",
                "bar": "[agentcompass.benchmarks]\nmine = bar_pkg:Mine\n",
            },
            "benchmark id 'mine' is declared by entry point 'mine = bar_pkg:Mine' (distribution bar 1.0) "
            "and entry point 'mine = foo_pkg:Mine' (distribution foo 1.0)",
        ),
    ],
)
def test_an_id_declared_twice_is_an_error_naming_both(
    tmp_path: Path, distributions: dict[str, str], expected: str
) -> None:
    """#30: an entry point whose id is a built-in's, or two entry points of one id, stop `agentcompass run`
    with one line naming both sources, exit 2, instead of one of them silently never running; `--help`
    reads no entry point, so it is not held up by them."""
    sites = []
    for name, text in distributions.items():  # each on a PYTHONPATH entry of its own: foo found first
        _distribution(tmp_path / name, name, text)
        sites.append(str(tmp_path / name))
    env = _clean_env(PYTHONPATH=os.pathsep.join(sites))
    proc = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "run", str(_sweep(tmp_path, "demo")), "--direct"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == f"agentcompass: error: {expected}\n", proc.stderr
    assert not (tmp_path / "results").exists()
    helped = subprocess.run(
        [sys.executable, "-m", "agentcompass_dagster.cli.main", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert helped.returncode == 0, helped.stderr


# --- plugins named by class path ---------------------------------------------------------------------

CLASS_PATH_PLUGINS = '''\
"""One plugin of each kind, importable only from the folder a test puts on PYTHONPATH."""

from agentcompass_dagster.plugins.benchmarks.synthetic import SyntheticBenchmark
from agentcompass_dagster.contracts.analyzer import Analyzer
from agentcompass_dagster.plugins.environments.local import LocalEnvironment
from agentcompass_dagster.plugins.harnesses.oracle import OracleHarness
from agentcompass_dagster.plugins.models.none import NoModel


class Bench(SyntheticBenchmark):
    pass


class Agent(OracleHarness):
    pass


class Box(LocalEnvironment):
    pass


class Silent(NoModel):
    pass


class Answered(Analyzer):
    name = "answered"

    def analyze(self, task, attempt):
        return {"answered": attempt.final_answer is not None}

    def summarize(self, items):
        return {"answered": sum(item.result["answered"] for item in items)}
'''


def _class_path_sweep(directory: Path) -> Path:
    path = directory / "bypath.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "bypath",
                "benchmarks": [{"id": "my_plugins:Bench", "params": {"n_tasks": 2}}],
                "models": [{"id": "silent", "provider": "my_plugins:Silent"}],
                "harness": "my_plugins:Agent",
                "environment": {"id": "box", "provider": "my_plugins:Box"},
                "execution": {"analyzers": ["my_plugins:Answered"]},
                "dagster": {"executor": "multiprocess"},
                "output": {"results_dir": str(directory / "results")},
            },
            sort_keys=False,
        )
    )
    return path


def test_plugins_named_by_class_path_run_through_dagster_step_processes(tmp_path: Path) -> None:
    """#30: a benchmark, harness, environment, model and analyzer each named `module:Class` in the sweep,
    the module importable only through PYTHONPATH, run by `agentcompass run` through Dagster with every
    step in a process of its own (which loads the sweep again), and run_info.json records the class paths;
    without the folder on PYTHONPATH it is one line naming the sweep, the field and the value, exit 2."""
    (tmp_path / "plugins" / "my_plugins").mkdir(parents=True)
    (tmp_path / "plugins" / "my_plugins" / "__init__.py").write_text(CLASS_PATH_PLUGINS)
    sweep = _class_path_sweep(tmp_path)
    proc = _run(sweep, tmp_path, tmp_path / "plugins")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    (run_info,) = (tmp_path / "results" / "bypath").rglob("run_info.json")
    request = json.loads(run_info.read_text())["request"]
    assert request["dagster_run_id"]
    assert (
        request["benchmark"]["id"],
        request["harness"]["id"],
        request["environment"]["provider"],
        request["model"]["provider"],
        request["execution"]["analyzers"],
    ) == ("my_plugins:Bench", "my_plugins:Agent", "my_plugins:Box", "my_plugins:Silent", ["my_plugins:Answered"])
    details = [json.loads(p.read_text()) for p in (run_info.parent / "details").glob("*.json")]
    assert len(details) == 2 and all(d["correct"] for d in details)
    assert all(d["attempts"]["1"]["analysis_result"] == {"answered": {"answered": True}} for d in details)

    missing = _run(sweep, tmp_path, None)
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert missing.stderr == (
        f"agentcompass: error: {sweep}: benchmarks[0].id='my_plugins:Bench': the benchmark class "
        "cannot be loaded: No module named 'my_plugins'; is it on PYTHONPATH?\n"
    ), missing.stderr


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"harness": "no_such_module_30.agent:Agent"},
            "harness.id='no_such_module_30.agent:Agent': the harness class cannot be loaded: No module named "
            "'no_such_module_30'; is it on PYTHONPATH?",
        ),
        (
            {"benchmarks": [{"id": "agentcompass_dagster.plugins.benchmarks.demo:NoSuchBenchmark"}]},
            "benchmarks[0].id='agentcompass_dagster.plugins.benchmarks.demo:NoSuchBenchmark': "
            "the benchmark class cannot be loaded: "
            "module 'agentcompass_dagster.plugins.benchmarks.demo' has no attribute 'NoSuchBenchmark'",
        ),
        (
            {"environment": {"id": "box", "provider": "agentcompass_dagster.plugins.harnesses.oracle:OracleHarness"}},
            "environment.provider='agentcompass_dagster.plugins.harnesses.oracle:OracleHarness': "
            "the environment plugin <class 'agentcompass_dagster.plugins.harnesses.oracle.OracleHarness'> "
            "is not a subclass of agentcompass_dagster.contracts.environment.Environment",
        ),
        (
            {"models": [{"id": "m", "provider": "collections:OrderedDict"}]},
            "models[0].provider='collections:OrderedDict': the model plugin <class 'collections.OrderedDict'> is not a "
            "subclass of agentcompass_dagster.contracts.model.Model",
        ),
        (
            {"execution": {"analyzers": ["agentcompass_dagster.plugins.analyzers.loops:Nope"]}},
            "execution.analyzers[0]='agentcompass_dagster.plugins.analyzers.loops:Nope': "
            "the analyzer class cannot be loaded: "
            "module 'agentcompass_dagster.plugins.analyzers.loops' has no attribute 'Nope'",
        ),
    ],
)
def test_a_bad_class_path_is_one_line_naming_the_file_the_field_and_the_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], expected: str
) -> None:
    """#30: a class path whose module cannot be imported, whose module lacks the class, or whose class is not
    the kind's contract is refused when the sweep loads: exit 2, one line naming the sweep file, the field
    and the value, nothing written."""
    sweep = write_sweep(tmp_path, **fields)
    assert run_cli("run", sweep, "--direct") == 2
    err = capsys.readouterr().err
    assert err == f"agentcompass: error: {sweep}: {expected}\n", err
    assert not (tmp_path / "results").exists()
