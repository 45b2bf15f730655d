"""The attempt lifecycle, evaluation modes, retry scopes, checkpoints, analyzers and cleanup, proven from
the recorded order of lifecycle calls (tests/lifecycle.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import pytest
from lifecycle import Lifecycle

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.declarations import BenchmarkConfig, EnvironmentConfig, HarnessConfig, ModelConfig
from agentcompass_dagster.contracts.request import ExecutionConfig, OutputConfig, EvalRequest
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.analyzer import Analyzer, AttemptResult
from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.execution.strategies import STRATEGIES
from agentcompass_dagster.runtime.results.metrics import pass_at_k
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator, orchestrate
from agentcompass_dagster.runtime.store.run_store import open_run_dir
from agentcompass_dagster.runtime.store.outcomes import RequestResult, TaskDetail
from agentcompass_dagster.contracts.request import Strategy

SPLIT_NETWORK = {"baseline": "host", "run": "none", "evaluation": "host"}


# Every test runs with the recording plugins registered (conftest's `recorder`); what it registers is gone
# after it.
pytestmark = pytest.mark.usefixtures("recorder")


def make_request(
    tmp_path: Path, *, n: int = 1, name: str = "r", harness: dict[str, Any] | None = None, **execution: Any
) -> EvalRequest:
    execution.setdefault("network", SPLIT_NETWORK)
    return EvalRequest(
        name=name,
        benchmark=BenchmarkConfig(id="faulty", params={"n_tasks": n}),
        model=ModelConfig(id="m"),
        harness=HarnessConfig(id="recording", params={"default": {"oracle": True}, **(harness or {})}),
        environment=EnvironmentConfig(id="rec", provider="recording"),
        execution=ExecutionConfig.model_validate(execution),
        output=OutputConfig(results_dir=tmp_path / "results", run_name=name),
    )


def run_one(request: EvalRequest) -> tuple[RequestResult, TaskDetail]:
    result = orchestrate([request])
    outcome = result.outcomes[request.name]
    assert outcome.result is not None, outcome.error
    details = open_run_dir(Path(outcome.result.run_dir)).load_all_details()
    return outcome.result, details["t0"]


RUN = ["prepare", "adapt", "start", "policy:{n}:none", "run", "close_session", "collect"]


def run_part(n: int) -> list[str]:
    return [e.format(n=n) for e in RUN]


def test_reuse_mode_order(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-ATT-1, R-ATT-2, R-ATT-3, R-ATT-4 (reuse), R-NET-1: the plan is built before the environment opens;
    the harness runs under the run policy; artifacts are collected while the environment is alive and in
    run policy; evaluation runs in the task session under the evaluation policy; baseline is restored."""
    _, detail = run_one(make_request(tmp_path))
    assert detail.correct
    assert recorder.after_load() == [
        "plan",
        "open:1",
        *run_part(1),
        "policy:1:host",
        "evaluate:1",
        "policy:1:host",
        "close:1",
    ]


def test_none_mode_order(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-ATT-4 (none): the task environment closes before the driver evaluates with env=None."""
    _, detail = run_one(make_request(tmp_path, evaluation_environment_mode="none"))
    assert detail.correct
    assert recorder.after_load() == ["plan", "open:1", *run_part(1), "close:1", "evaluate:none"]


def test_fresh_mode_order(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-ATT-4 (fresh): the task environment closes, a new evaluation session opens, switches to the
    evaluation policy, evaluates, restores baseline and closes in its own finally."""
    _, detail = run_one(make_request(tmp_path, evaluation_environment_mode="fresh"))
    assert detail.correct
    assert recorder.after_load() == [
        "plan",
        "open:1",
        *run_part(1),
        "close:1",
        "open:2",
        "policy:2:host",
        "evaluate:2",
        "policy:2:host",
        "close:2",
    ]


def test_keep_environment_only_skips_close(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-ATT-4: keep_environment=True skips closing and changes nothing else (none mode still gets env=None)."""
    run_one(make_request(tmp_path, evaluation_environment_mode="none", keep_environment=True))
    assert recorder.after_load() == ["plan", "open:1", *run_part(1), "evaluate:none"]


@pytest.mark.parametrize(
    ("site", "mode", "expected"),
    [
        (
            "open",
            "reuse",
            ["plan", "open:1", "open:2", *run_part(2), "policy:2:host", "evaluate:2", "policy:2:host", "close:2"],
        ),
        (
            "prepare",
            "reuse",
            [
                "plan",
                "open:1",
                "prepare",
                "close:1",
                "open:2",
                *run_part(2),
                "policy:2:host",
                "evaluate:2",
                "policy:2:host",
                "close:2",
            ],
        ),
        (
            "run",
            "reuse",
            [
                "plan",
                "open:1",
                *run_part(1)[:5],
                "close_session",
                "close:1",
                "open:2",
                *run_part(2),
                "policy:2:host",
                "evaluate:2",
                "policy:2:host",
                "close:2",
            ],
        ),
        (
            "collect",
            "reuse",
            [
                "plan",
                "open:1",
                *run_part(1),
                "close:1",
                "open:2",
                *run_part(2),
                "policy:2:host",
                "evaluate:2",
                "policy:2:host",
                "close:2",
            ],
        ),
        (
            "evaluate",
            "reuse",
            [
                "plan",
                "open:1",
                *run_part(1),
                "policy:1:host",
                "evaluate:1",
                "policy:1:host",
                "close:1",
                "open:2",
                *run_part(2),
                "policy:2:host",
                "evaluate:2",
                "policy:2:host",
                "close:2",
            ],
        ),
        ("evaluate", "none", ["plan", "open:1", *run_part(1), "close:1", "evaluate:none", "evaluate:none"]),
        (
            "evaluate",
            "fresh",
            [
                "plan",
                "open:1",
                *run_part(1),
                "close:1",
                "open:2",
                "policy:2:host",
                "evaluate:2",
                "policy:2:host",
                "close:2",
                "open:3",
                "policy:3:host",
                "evaluate:3",
                "policy:3:host",
                "close:3",
            ],
        ),
        ("evaluate_raise", "none", ["plan", "open:1", *run_part(1), "close:1", "evaluate:none", "evaluate:none"]),
    ],
)
def test_retry_scope_by_failure_site(
    tmp_path: Path, site: str, mode: str, expected: list[str], recorder: Lifecycle
) -> None:
    """R-RETRY-2: prepare/env/inference/artifact failures and reuse-mode evaluation failures rerun the
    whole attempt in a new environment with the same plan (one "plan"); a none-mode evaluation failure
    retries evaluate only; a fresh-mode one reopens the evaluation environment. R-RETRY-3: the
    discarded try is in retry_details/ with its phase and scope."""
    recorder.faults[site] = 1
    result, detail = run_one(make_request(tmp_path, evaluation_environment_mode=mode, max_retries=1))
    assert recorder.after_load() == expected
    assert detail.correct and not detail.is_error and detail.retry_count == 1
    (record_path,) = Path(result.paths["retry_details"]).iterdir()
    record = json.loads(record_path.read_text())
    phase = {"open": "environment", "run": "inference", "collect": "artifact"}.get(site, site)
    scope = "attempt" if mode == "reuse" else {"none": "evaluate", "fresh": "evaluation_environment"}[mode]
    assert (record["phase"], record["scope"], record["retry"], record["matched_pattern"]) == (
        phase.replace("evaluate_raise", "evaluation").replace("evaluate", "evaluation"),
        scope,
        1,
        "*",
    )
    assert record["plan"]["evaluation_environment_mode"] == mode
    assert "injected" in record["error"]


@pytest.mark.parametrize(
    ("patterns", "retried"),
    [(None, True), (["injected run"], True), (["^nothing like it$"], False), ([], False)],
)
def test_retry_pattern_list_meanings(
    tmp_path: Path, patterns: list[str] | None, retried: bool, recorder: Lifecycle
) -> None:
    """R-RETRY-1: retry_pattern_list None retries any non-empty error, a list retries regex matches, []
    retries nothing. After the budget is spent the traceback stays in the result (R-RETRY-3)."""
    recorder.faults["run"] = 1
    result, detail = run_one(make_request(tmp_path, max_retries=3, retry_pattern_list=patterns))
    assert detail.is_error is not retried
    assert len(list(Path(result.paths["retry_details"]).iterdir())) == int(retried)
    if not retried:
        assert "Traceback" in (detail.error or "") and "injected run failure" in (detail.error or "")


def test_retry_budget_is_per_semantic_attempt_and_shared_by_phases(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-RETRY-1: the budget resets for each semantic attempt and all retryable phases of one attempt share
    it; R-ATT-1: each semantic attempt re-plans, runtime retries reuse the attempt's plan."""
    recorder.faults.update({"prepare": 1, "evaluate": 1})
    _, detail = run_one(make_request(tmp_path, evaluation_environment_mode="none", max_retries=1))
    assert detail.attempts["1"].eval_error == "injected evaluate failure"
    recorder.clear()
    flaky = {"default": {"succeed_on": 2, "oracle": True}}
    result, detail = run_one(make_request(tmp_path, name="k2", attempts={"k": 2}, max_retries=1, harness=flaky))
    assert [detail.attempts[i].retries for i in ("1", "2")] == [1, 1]
    assert not detail.is_error and recorder.after_load().count("plan") == 2
    info = json.loads(Path(result.paths["run_info"]).read_text())
    assert set(info["task_plans"]["t0"]) == {"1", "2"}


def test_avg_and_pass_strategies_and_pass_at_k(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-RETRY-1: avg runs all k attempts, pass stops at the first valid success; pass@k uses the unbiased
    estimator: n=5, c=2 gives pass@1 0.4, pass@2 0.7, pass@5 1.0."""
    steps = [{"answer": "answer-0"}, {"answer": "no"}, {"answer": "answer-0"}, {"answer": "no"}, {"answer": "no"}]
    result, detail = run_one(make_request(tmp_path, attempts={"k": 5}, harness={"tasks": {"t0": steps}}))
    assert detail.attempts_tried == 5 and detail.first_correct_attempt == 1 and detail.score == 0.4
    metrics = result.metrics.metrics
    assert metrics["accuracy"] == pytest.approx(0.4)
    assert (metrics["pass@1"], metrics["pass@2"], metrics["pass@5"]) == pytest.approx((0.4, 0.7, 1.0))
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4) and pass_at_k(5, 0, 5) == 0.0
    recorder.clear()
    steps = [{"answer": "no"}, {"answer": "answer-0"}, {"answer": "answer-0"}]
    result, detail = run_one(
        make_request(tmp_path, name="p", attempts={"k": 3, "strategy": "pass"}, harness={"tasks": {"t0": steps}})
    )
    assert detail.attempts_tried == 2 and detail.first_correct_attempt == 2 and detail.correct
    assert set(result.metrics.metrics) >= {"pass@3"} and "pass@1" not in result.metrics.metrics


def test_the_declarable_strategies_are_the_ones_the_runner_knows() -> None:
    """R-RETRY-1: every strategy a declaration accepts has its rule, and any other is refused when the
    declaration is validated, naming the allowed ones."""
    assert set(STRATEGIES) == set(get_args(Strategy))
    with pytest.raises(UserError, match=r"^execution: attempts.strategy='best': not one of avg, pass$"):
        validate_declaration(ExecutionConfig, {"attempts": {"strategy": "best"}}, "execution")


@pytest.mark.parametrize("older", [False, True], ids=["finished_attempts", "older-name"])
def test_interrupted_task_runs_only_missing_attempts(tmp_path: Path, older: bool) -> None:
    """R-RETRY-4: each evaluated attempt is recorded under its index; a rerun with reuse restores
    compatible records and runs only the missing attempts; the records go once the detail is saved.
    R-COMPAT-1: a source run that kept them under the name before issue 40 (.attempt_checkpoints) too."""
    record = tmp_path / "calls.jsonl"
    slow = {"tasks": {"t0": [{"oracle": True}, {"oracle": True}, {"sleep": 30}]}, "record": str(record)}
    first = orchestrate(
        [
            make_request(
                tmp_path,
                attempts={"k": 3},
                harness=slow,
                limits={"orchestration_timeout_s": 1.5, "cleanup_grace_seconds": 5},
            )
        ]
    )
    assert first.status == "timeout"
    source = Path(first.outcomes["r"].paths["run_dir"])
    assert sorted(p.name for p in (source / ".finished_attempts").iterdir()) == ["t0@1.json", "t0@2.json"]
    kept = source / (".attempt_checkpoints" if older else ".finished_attempts")
    if older:
        (source / ".finished_attempts").rename(kept)
    record.unlink()
    quick = {"record": str(record)}
    request = make_request(tmp_path, attempts={"k": 3}, harness=quick)
    request = request.model_copy(update={"output": request.output.model_copy(update={"reuse": True})})
    result, detail = run_one(request)
    starts = [json.loads(line) for line in record.read_text().splitlines() if '"start"' in line]
    assert [(s["task"], s["attempt"]) for s in starts] == [("t0", 3)]
    assert list(detail.attempts) == ["1", "2", "3"] and detail.correct
    assert list((Path(result.run_dir) / ".finished_attempts").iterdir()) == []
    assert sorted(p.name for p in kept.iterdir()) == ["t0@1.json", "t0@2.json"]


class ExplodingAnalyzer(Analyzer):
    name = "exploding"
    family = "test"

    def analyze(self, task: Any, attempt: Any) -> dict[str, Any]:
        raise ValueError("analyzer bug")

    def summarize(self, items: Sequence[AttemptResult]) -> dict[str, Any]:
        return {}


class ElsewhereAnalyzer(ExplodingAnalyzer):
    name = "elsewhere"
    datasets = frozenset({"another-benchmark"})


def test_analyzers_are_selected_and_failures_recorded_apart(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-ATT-5: analyzers are picked by config, family, dataset and data requirements; one that raises is
    recorded apart and changes no score; analysis_summary.md|json aggregate the rest."""
    registry.analyzers.register("exploding", ExplodingAnalyzer)
    registry.analyzers.register("elsewhere", ElsewhereAnalyzer)
    steps = [{"type": "command", "command": "ls"}, {"type": "message", "content": "done"}]
    harness = {"tasks": {"t0": {"oracle": True, "trajectory": steps}, "t1": {"raise": "harness broke"}}}
    result, detail = run_one(make_request(tmp_path, n=2, harness=harness))
    attempt = detail.attempts["1"]
    assert attempt.correct and attempt.score == 1.0 and attempt.error is None
    assert "analyzer bug" in attempt.meta["analysis_errors"]["exploding"]
    assert "elsewhere" not in attempt.meta["analysis_errors"]
    assert attempt.analysis_result is not None and attempt.analysis_result["error_category"] == {"category": "none"}
    assert attempt.analysis_result["trajectory_stats"] | {"duration_s": 0} == {
        "steps": 2,
        "tool_calls": 1,
        "tokens": 0,
        "duration_s": 0,
    }
    failed = open_run_dir(Path(result.run_dir)).load_all_details()["t1"].attempts["1"]
    assert failed.analysis_result == {"error_category": {"category": "harness_exception", "exception": "RuntimeError"}}
    data = json.loads((Path(result.run_dir) / "analysis_summary.json").read_text())
    assert data["error_category"] == {"none": 1, "harness_exception": 1}
    assert data["analysis_failures"] == 2
    assert (Path(result.run_dir) / "analysis_summary.md").read_text().startswith("# Analysis")
    recorder.clear()
    _, detail = run_one(make_request(tmp_path, name="only-errors", analyzers=["errors"]))
    assert set(detail.attempts["1"].analysis_result or {}) == {"error_category"}
    with pytest.raises(UserError, match="execution.analyzers='nonsense'"):
        Orchestrator([make_request(tmp_path, name="bad", analyzers=["nonsense"])]).preflight()


def test_close_failure_never_hides_the_task_error(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-CLEAN-1: a harness session whose close raises leaves the task's own error in the detail and a
    warning in run.log; an environment close failure is a warning too; the order stays inside-out."""
    recorder.faults.update({"close_session": 1, "close": 1})
    result, detail = run_one(make_request(tmp_path, harness={"default": {"raise": "the task's own failure"}}))
    assert detail.is_error and "the task's own failure" in (detail.error or "")
    assert "injected close" not in (detail.error or "")
    log = Path(result.paths["log"]).read_text()
    assert "warning: closing the harness session failed" in log
    assert "warning: closing the task environment failed" in log
    assert recorder.after_load() == [
        "plan",
        "open:1",
        "prepare",
        "adapt",
        "start",
        "policy:1:none",
        "run",
        "close_session",
        "close:1",
    ]


def test_finalize_merges_reused_and_new_in_selected_order(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-FIN-1: finalisation merges reused and new details in the selected task order before
    Benchmark.aggregate_metrics, and writes summary.md and .summary_counts.json."""
    first = orchestrate([make_request(tmp_path, n=6)])
    run_dir = Path(first.outcomes["r"].paths["run_dir"])
    for name in ("t1_b.json", "t4_b.json"):
        (run_dir / "details" / name).unlink()
    recorder.clear()
    request = make_request(tmp_path, n=6)
    request = request.model_copy(update={"output": request.output.model_copy(update={"reuse": True})})
    result, _ = run_one(request)
    assert recorder.aggregated == [["t0", "t1", "t2", "t3", "t4", "t5"]]
    counts = json.loads((Path(result.run_dir) / ".summary_counts.json").read_text())
    assert (counts["reused"], counts["new"]) == (4, 2)
    assert "| accuracy | 1.0000 |" in (Path(result.run_dir) / "summary.md").read_text()


def test_baseline_restore_survives_cancellation(tmp_path: Path, recorder: Lifecycle) -> None:
    """R-NET-1: restoring the baseline policy after evaluation is shielded from cancellation: a timeout
    that lands during evaluation still restores baseline and closes the environment."""
    recorder.sleeps["evaluate_raise"] = 30
    result = orchestrate([make_request(tmp_path, limits={"orchestration_timeout_s": 1.0})])
    assert result.status == "timeout"
    tail = recorder.after_load()[-3:]
    assert tail == ["evaluate:1", "policy:1:host", "close:1"]


def test_local_environment_refuses_a_network_switch(tmp_path: Path) -> None:
    """R-NET-1: a provider that cannot switch policy refuses a plan whose phases differ, before anything
    runs (no run directory)."""
    request = make_request(tmp_path).model_copy(update={"environment": EnvironmentConfig(id="local")})
    with pytest.raises(UserError, match="execution.network"):
        Orchestrator([request]).preflight()
    assert not (tmp_path / "results").exists()
