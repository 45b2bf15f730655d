"""History at a glance (issue #28): `agentcompass history SWEEP`, results.load_history and the HTML
report's History section, on real runs.

The sweep `hist` (the synthetic benchmark, 10 tasks, the scripted harness, models m1 and m2) is run twice
with `agentcompass run --direct`: first every task solved at $0.01 an attempt; then m1 gets three tasks
wrong (0.7) and m2 has one attempt without a price (its cost unknown) and one task ending in an error.
The regression check's verdicts are written into the run directories as the check writes them; one run
of a second sweep, `other`, shares the results directory.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from agentcompass_dagster.reporting.report import build_report
from agentcompass_dagster.reporting.results import load_history, load_metrics
from agentcompass_dagster.runtime.results.regression import RegressionVerdict, write_verdict

from conftest import run_cli

PAID = {"oracle": True, "usage": {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.01}}
WRONG = {"answer": "wrong", "usage": {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.01}}
SECOND_RUN = {
    "m1": {task: WRONG for task in ("t00", "t01", "t02")},
    "m2": {
        "t00": {"oracle": True, "usage": {"input_tokens": 100, "cost_usd": None}},
        "t01": {"error": "endpoint down"},
    },
}
DATE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d$")


def _sweep(directory: Path, name: str, models: list[str], by_model: dict[str, Any]) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "benchmarks": [{"id": "synthetic", "params": {"n_tasks": 10}}],
                "models": [{"id": model, "provider": "none"} for model in models],
                "harness": {"id": "scripted", "params": {"default": PAID, "by_model": by_model}},
                "environment": "local",
                "output": {"results_dir": str(directory / "results")},
            },
            sort_keys=False,
        )
    )
    return path


def _verdict(run_dir: Path, status: str, baseline: str | None, **fields: Any) -> None:
    sweep, benchmark, model, run_id = run_dir.parts[-4:]
    write_verdict(
        run_dir,
        RegressionVerdict(
            sweep=sweep,
            benchmark=benchmark,
            model=model,
            run_id=run_id,
            baseline_run_id=baseline,
            status=status,
            reason="test",
            alpha=0.05,
            min_drop=0.05,
            checked_at=0.0,
            **fields,
        ),
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("history")
    assert run_cli("run", _sweep(directory, "hist", ["m1", "m2"], {}), "--direct") == 0
    # m2's task t01 ends in an error: the sweep completes with exit 3
    assert run_cli("run", _sweep(directory, "hist", ["m1", "m2"], SECOND_RUN), "--direct") == 3
    assert run_cli("run", _sweep(directory, "other", ["m1"], {}), "--direct") == 0
    results = directory / "results"
    (m1_first, m1_second), (m2_first, m2_second) = (
        sorted(p for p in (results / "hist" / "synthetic" / model).iterdir() if p.is_dir()) for model in ("m1", "m2")
    )
    _verdict(m1_second, "failed", m1_first.name, p_value=0.0123, diff=-0.3, n=10)
    _verdict(m2_first, "skipped", None)
    _verdict(m2_second, "passed", m2_first.name, p_value=0.5, diff=0.0, n=9)
    return results


def test_load_history_gives_one_row_per_run_with_accuracy_interval_cost_and_verdict(results: Path) -> None:
    """Issue #28: load_history() returns one row per run of each benchmark x model, oldest first: its
    date, accuracy with the 95% interval metrics.parquet recorded, n/total, errors, cost (NaN when an
    attempt's cost is unknown) and the regression check's verdict (NaN where the run has none)."""
    history = load_history(results, "hist")
    assert list(history[["model", "accuracy"]].itertuples(index=False, name=None)) == [
        ("m1", 1.0),
        ("m1", 0.7),
        ("m2", 1.0),
        ("m2", 1.0),
    ]
    assert (history["sweep"] == "hist").all() and (history["benchmark"] == "synthetic").all()
    for _, runs in history.groupby("model"):
        assert runs["started_at"].is_monotonic_increasing and runs["run_id"].is_unique
    accuracy = load_metrics(results, latest=False).query("metric == 'accuracy' and sweep == 'hist'")
    recorded = accuracy.set_index(["model", "run_id"])[["ci_low", "ci_high"]]
    assert history.set_index(["model", "run_id"])[["ci_low", "ci_high"]].sort_index().equals(recorded.sort_index())
    assert history.loc[1, "ci_low"] < 0.7 < history.loc[1, "ci_high"]
    assert list(zip(history["n"], history["total"], history["errors"])) == [
        (10, 10, 0),
        (10, 10, 0),
        (10, 10, 0),
        (9, 10, 1),
    ]
    assert history["cost_usd"].iloc[:3].tolist() == pytest.approx([0.1, 0.1, 0.1])
    assert math.isnan(history.loc[3, "cost_usd"])  # t00's attempt has no price: not a partial $0.08
    assert pd.isna(history.loc[0, "regression"]) and history["regression"].iloc[1:].tolist() == [
        "failed",
        "skipped",
        "passed",
    ]
    assert (history.loc[1, "regression_p_value"], history.loc[1, "regression_diff"]) == (0.0123, -0.3)
    assert history.loc[1, "baseline_run_id"] == history.loc[0, "run_id"]
    assert all((Path(d) / "metrics.parquet").is_file() for d in history["run_dir"])
    every = load_history(results)
    assert sorted(every["sweep"].unique()) == ["hist", "other"] and len(every) == 5
    assert load_history(results, "nope").empty


def test_history_command_prints_one_line_per_run(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #28: `agentcompass history SWEEP` prints one line per run, grouped by benchmark x model and
    ordered by date: date (UTC, minutes), benchmark, model, accuracy with its 95% interval, n/total,
    errors, cost ($ or n/a), the regression verdict (passed / FAILED p= diff / skipped / —), run id."""
    history = load_history(results, "hist")
    assert run_cli("history", "hist", "--results-dir", results) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == [
        "date (UTC)",
        "benchmark",
        "model",
        "accuracy [95% CI]",
        "n/total",
        "errors",
        "cost",
        "regression",
        "run",
    ]
    assert lines[3] == ""  # between m1's runs and m2's
    rows = [re.split(r"\s{2,}", line) for line in lines[1:3] + lines[4:]]
    assert len(rows) == 4 and all(len(row) == 9 for row in rows)
    for row, (_, run) in zip(rows, history.iterrows()):
        assert DATE.match(row[0]) and row[0] == run["started_at"].strftime("%Y-%m-%d %H:%M")
        assert row[1:3] == ["synthetic", run["model"]]
        assert row[3] == f"{run['accuracy']:.3f} [{run['ci_low']:.3f}, {run['ci_high']:.3f}]"
        assert row[8] == run["run_id"]
    assert [row[4:8] for row in rows] == [
        ["10/10", "0", "$0.1000", "—"],
        ["10/10", "0", "$0.1000", "FAILED p=0.012 -0.30"],
        ["10/10", "0", "$0.1000", "skipped"],
        ["9/10", "1", "n/a", "passed"],
    ]
    assert rows[1][3].startswith("0.700 [")

    # the sweep's YAML file finds the same runs where its output.results_dir says
    assert run_cli("history", results.parent / "hist.yaml") == 0
    assert capsys.readouterr().out == out


def test_history_csv_is_the_frame(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--format csv` prints load_history's frame, unformatted, for other tools."""
    assert run_cli("history", "hist", "--results-dir", results, "--format", "csv") == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    history = load_history(results, "hist")
    assert list(printed.columns) == list(history.columns)
    assert printed["run_id"].tolist() == history["run_id"].tolist()
    assert printed["accuracy"].tolist() == history["accuracy"].tolist()


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "agentcompass: error: sweep 'nope': no runs in {results} (sweeps with runs there: hist, other)"),
        (
            ["hist", "--results-dir", "{empty}"],
            "agentcompass: error: sweep 'hist': no runs in {empty} (sweeps with runs there: none)",
        ),
        (["hist", "--results-dir", "{missing}"], "agentcompass: error: {missing}: no such results directory"),
        (["{missing}.yaml"], "agentcompass: error: {missing}.yaml: no such file"),
    ],
)
def test_history_refuses_bad_input_in_one_line(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Issue #28: an unknown sweep, a results directory without runs or missing, a sweep file that does
    not exist: one line naming it, exit code 2, nothing on stdout."""
    names = {"results": results, "empty": tmp_path, "missing": tmp_path / "missing"}
    args = [arg.format(**names) for arg in args]
    if args[0] == "nope":
        args += ["--results-dir", str(results)]
    assert run_cli("history", *args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == message.format(**names) + "\n"


def _history_tables(document: str) -> dict[str, list[list[str]]]:
    """Each model's History table of the page as rows of cell text (tags removed)."""
    section = document[document.index("<h3>History</h3>") : document.index("<h3>Plots</h3>")]
    tables = re.findall(r'<h4>(.*?)</h4><table class="history">(.*?)</table>', section)
    return {
        model: [
            [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body)
        ]
        for model, body in tables
    }


def test_report_has_a_history_table_per_benchmark_and_model(results: Path) -> None:
    """Issue #28: the HTML report has a History section, one table per benchmark x model with the same
    lines as `agentcompass history` (benchmark and model named by the section and the table), each run
    id linked to its summary."""
    document = build_report(results)
    hist = document[document.index("<h2>hist · synthetic</h2>") : document.index("<h2>other · synthetic</h2>")]
    tables = _history_tables(hist)
    assert list(tables) == ["m1", "m2"]
    history = load_history(results, "hist")
    for model, rows in tables.items():
        runs = history[history["model"] == model]
        body = [row for row in rows if row]  # the header row has <th> cells only
        assert [row[-1] for row in body] == runs["run_id"].tolist()
        assert [row[1] for row in body] == [
            f"{a:.3f} [{lo:.3f}, {hi:.3f}]" for a, lo, hi in zip(runs["accuracy"], runs["ci_low"], runs["ci_high"])
        ]
    assert [row[2:6] for row in tables["m1"] if row] == [
        ["10/10", "0", "$0.1000", "—"],
        ["10/10", "0", "$0.1000", "FAILED p=0.012 -0.30"],
    ]
    assert [row[2:6] for row in tables["m2"] if row] == [
        ["10/10", "0", "$0.1000", "skipped"],
        ["9/10", "1", "n/a", "passed"],
    ]
    for run_id in history["run_id"]:
        assert re.search(rf'<a href="hist/synthetic/m\d/{run_id}/summary.md">{run_id}</a>', hist)
    other = document[document.index("<h2>other · synthetic</h2>") :]
    assert list(_history_tables(other)) == ["m1"]
