"""Where runs lie and what every file of a results directory is called (R-STORE-1).

``<results_dir>/<run_name>/<benchmark_id>/<model_id>/<run_id>/`` holds ``run_info.json``, ``params.json``,
``details/<task>[_<category>].json``, ``details/_error_<task>[_<category>].json``, ``retry_details/``,
``summary.md``, ``.summary_counts.json``, ``run.log``, ``metrics.parquet``, ``task_results.parquet``,
``regression.json``, ``replays/`` and ``artifacts/``. The root of a benchmark x model is derived here only, for the
runtime and the Dagster layer alike. The names are defined here only (tests/test_house.py checks that
no other module spells one).
"""

from __future__ import annotations

from pathlib import Path

from agentcompass_dagster.contracts.request import EvalRequest, OutputConfig
from agentcompass_dagster.runtime.store.naming import file_stem, normalize_component

RUN_INFO = "run_info.json"
# The process running a run (host@pid:start), from its start to its terminal status: a run whose process
# is gone while this file is there was killed, and the next run marks it failed.
OWNER = ".running"
PARAMS = "params.json"
DETAILS = "details"
RETRY_DETAILS = "retry_details"
# The k>1 tasks' finished attempts (R-RETRY-4); runs before issue 40 kept them under the older name,
# which said "checkpoints", a word that means the durable layer's (R-COMPAT-1: still read).
FINISHED_ATTEMPTS_DIR = ".finished_attempts"
OLDER_FINISHED_ATTEMPTS_DIR = ".attempt_checkpoints"
DURABLE = ".durable"
# Each attempt's files beside its detail (<task>@<attempt>/): a task image's build log, what the verifier
# left in /logs/verifier.
ARTIFACTS = "artifacts"
SUMMARY = "summary.md"
SUMMARY_COUNTS = ".summary_counts.json"
RUN_LOG = "run.log"
ANALYSIS_MD = "analysis_summary.md"
ANALYSIS_JSON = "analysis_summary.json"
ERROR_PREFIX = "_error_"
METRICS_FILE = "metrics.parquet"
TASK_RESULTS_FILE = "task_results.parquet"
# The regression check's verdict on the run.
VERDICT_FILE = "regression.json"
REPLAYS_DIR = "replays"
# The sweep's budget ledger, beside its benchmarks: every run of the sweep appends its model calls to it.
BUDGET_LEDGER = "budget.jsonl"
# The sweep's regression alerts, beside its benchmarks.
ALERTS_FILE = "alerts.jsonl"
# What the Dagster layer keeps of a sweep x benchmark in <results_dir>/<run_name>/<benchmark_id>/: the
# tasks, the newest run's metrics and task results of each model (METRICS_FILE, TASK_RESULTS_FILE), their
# SUMMARY, the pairwise comparisons, and the claims of the Dagster runs evaluating its partitions; the
# lock serialising those runs' claims lies beside it, in the sweep's directory.
TASKS_FILE = "tasks.parquet"
COMPARISON_FILE = "comparison.parquet"
COMPARISON_MD = "comparison.md"
CLAIMS_DIR = ".claims"
LOCK_FILE = ".agentcompass.lock"
# The HTML report, by default at the top of the results directory, and its trajectory pages beside it.
REPORT_FILE = "report.html"
PAGES_DIR = "trajectories"


def detail_names(task_id: str, category: str | None) -> list[str]:
    """Normal detail file names for a task, the one with the category first (R-REUSE-4)."""
    stem = file_stem(task_id)
    names = [f"{stem}_{file_stem(category)}.json"] if category else []
    return names + [f"{stem}.json"]


def run_root(output: OutputConfig, benchmark_id: str, model_id: str) -> Path:
    """Where the runs of one benchmark x model lie (R-STORE-1), user-named parts made safe; the runtime
    and the Dagster layer both find them here."""
    return (
        sweep_root(output)
        / normalize_component(benchmark_id, "benchmark.id")
        / normalize_component(model_id, "model.id")
    )


def request_root(request: EvalRequest) -> Path:
    """Where the runs of a request's benchmark x model lie; of its benchmark x contestant in a sweep of
    several harnesses, so that each harness's runs of a model stay apart."""
    return run_root(request.output, request.benchmark.id, request.contestant_id)


def sweep_root(output: OutputConfig) -> Path:
    """Where a sweep's benchmarks lie: ``<results_dir>/<run_name>``."""
    root = Path(output.results_dir)
    return root / normalize_component(output.run_name, "output.run_name") if output.run_name else root


def results_dir_of(run_path: Path, output: OutputConfig) -> Path:
    """The results_dir a run directory of ``output`` lies in, wherever it has moved since: run_root undone."""
    return Path(run_path).resolve().parents[3 if output.run_name else 2]
