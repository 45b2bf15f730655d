"""The report's diagnosis (issue #29): why a model scored what it did, from two real --direct runs.

``diag``: tool_agent on the scripted model over six demo tasks: three correct (one after running the
same command three times in a row, a loop; one after writing reward.txt, suspected reward hacking), one
wrong (submitted without any work: gave up), one ended by a malformed tool call (a failure the agent
caused: scored) and one by a failing model endpoint (an infrastructure error). ``errs``: a run whose
every task ended in an infrastructure error, which has nothing to plot. ``slow``: five tasks of a tasks
directory of its own, one whose model reply reports a thousand times the tokens and cost of the others
(a token and cost outlier) and one whose check sleeps 5 s (framework time, the check's, dominates the
attempt).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import run_cli, write_sweep, write_task
from scripted_agent import bash, submit

from agentcompass_dagster.plugins.benchmarks.demo import TASKS_DIR
from agentcompass_dagster.reporting import report
from agentcompass_dagster.reporting.report import build_report

ENDPOINT_ERROR = "upstream 503 <gateway> & co"
# time_split flags an attempt whose framework time is >= 5 s and more than half of it.
SLOW_CHECK = "sleep 5"
HREF = re.compile(r'href="([^"#][^"]*)"')


def _solution(task: str) -> str:
    return (TASKS_DIR / task / "solution.sh").read_text()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("diagnosis")
    turns = {
        "count-errors": [bash(_solution("count-errors")), submit()],
        "create-hello": [bash("echo 1 > reward.txt"), bash(_solution("create-hello")), submit()],
        "crlf-to-lf": [*[bash("wc -l notes.txt")] * 3, bash(_solution("crlf-to-lf")), submit()],
        "extract-column": [submit()],
        "fix-calc": [{"fail": ENDPOINT_ERROR}],
        "sort-unique": [{"tool_calls": [{"name": "bash", "arguments": "{not json"}]}],
    }
    broken = {"fix-calc": [{"fail": "down"}], "count-errors": [{"fail": "down"}]}
    tasks_dir = directory / "tasks"
    for task in ("hungry", "plain-1", "plain-2", "plain-3", "slow-check"):
        write_task(tasks_dir, task, check=SLOW_CHECK if task == "slow-check" else "true")
    slow = {
        "*": [submit()],
        "hungry": [{**submit(), "usage": {"prompt_tokens": 100_000, "completion_tokens": 10_000}, "cost_usd": 10.0}],
    }
    # diag and errs complete with tasks in error: exit 3.
    for name, model, script, benchmark, code in (
        ("diag", "solver", turns, {"tasks": sorted(turns)}, 3),
        ("errs", "broken", broken, {"tasks": sorted(broken)}, 3),
        ("slow", "spender", slow, {"params": {"tasks_dir": str(tasks_dir)}}, 0),
    ):
        sweep = write_sweep(
            directory,
            name=name,
            benchmarks=[{"id": "demo", **benchmark}],
            models=[{"id": model, "provider": "scripted", "params": {"turns": script}}],
            harness={"id": "tool_agent"},
        )
        assert run_cli("run", sweep, "--direct") == code
    return directory / "results"


@pytest.fixture(scope="module")
def document(results: Path) -> str:
    page = build_report(results)
    for link in HREF.findall(page):  # every link of the page reaches a file of the results directory
        assert (results / unquote(link)).is_file(), link
    return page


def _section(document: str, title: str) -> str:
    start = document.index(f"<h2>{title}</h2>")
    return document[start : document.index("</section>", start)]


def _table(section: str, klass: str) -> list[list[str]]:
    """The rows of the section's table of that class, as the cells' HTML."""
    body = re.search(rf'<table class="{klass}">(.*?)</table>', section, re.DOTALL)
    assert body is not None, klass
    return [
        re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body.group(1)) if "<td" in row
    ]


def _text(cell: str) -> str:
    return re.sub(r"<[^>]+>", "", cell)


def _links(cell: str) -> list[tuple[str, str]]:
    """(file the link reaches, its text) of each link in a cell."""
    return [(Path(unquote(href)).name, text) for href, text in re.findall(r'<a href="([^"]+)">(.*?)</a>', cell)]


def test_outcomes_split_agent_failures_from_infrastructure_errors(document: str) -> None:
    diag = _section(document, "diag · demo")
    assert [(row[0], row[1]) for row in _table(diag, "outcomes")] == [
        ("correct", "3"),
        ("wrong", "1"),
        ("agent failure", "1"),
        ("infrastructure error", "1"),
    ]
    errors = _table(diag, "errors")
    assert [(row[0], _text(row[2])) for row in errors] == [("infrastructure error", "1"), ("agent failure", "1")]
    # The text itself, escaped, in the page (not only a tooltip), and the attempt it ended.
    assert errors[0][1] == '<code class="message">model call failed: upstream 503 &lt;gateway&gt; &amp; co</code>'
    assert _links(errors[0][3]) == [("_error_fix-calc_fix.json", "fix-calc a1")]
    assert "malformed arguments for &#39;bash&#39;" in errors[1][1]
    assert _links(errors[1][3]) == [("sort-unique_transform.json", "sort-unique a1")]
    # Under the outcome in the per-task table too.
    tasks = {_text(row[0]): row[2] for row in _table(diag, "tasks")}
    assert tasks["fix-calc"].endswith(
        '✗ error</a><span class="why">model call failed: upstream 503 &lt;gateway&gt; &amp; co</span>'
    )
    assert '✗ failed</a><span class="why">model sent malformed arguments' in tasks["sort-unique"]
    assert tasks["extract-column"].endswith("✗ wrong</a>")


def test_analyzer_flags_with_counts_and_links_to_the_flagged_attempts(document: str) -> None:
    flags = {row[1]: row for row in _table(_section(document, "diag · demo"), "flags")}
    assert {name: (row[2], row[3]) for name, row in flags.items()} == {
        "loops": ("1", "6"),
        "tool_errors": ("1", "6"),
        "cost_outliers": ("0", "4"),
        "time_split": ("0", "6"),
        "gave_up": ("1", "6"),
        "reward_hacking": ("1", "6"),
    }
    assert _links(flags["loops"][5]) == [("crlf-to-lf_transform.json", "crlf-to-lf a1")]
    assert "command wc -l notes.txt" in flags["loops"][5]
    assert _links(flags["tool_errors"][5]) == [("sort-unique_transform.json", "sort-unique a1")]
    assert _links(flags["gave_up"][5]) == [("extract-column_transform.json", "extract-column a1")]
    assert "reason no_work" in flags["gave_up"][5]
    assert _links(flags["reward_hacking"][5]) == [("create-hello_files.json", "create-hello a1")]
    assert "patterns reward_write" in flags["reward_hacking"][5]
    assert _links(flags["cost_outliers"][5]) == [] and "&gt;= 4 attempts" in flags["cost_outliers"][4]


def test_usage_per_task_and_the_slowest_attempts(document: str) -> None:
    diag = _section(document, "diag · demo")
    usage = {row[0]: row[1:] for row in _table(diag, "usage")}
    # Tokens per task (110 a turn): 220, 330, 550, 110, and none for the two tasks ended on their first call.
    assert usage["tokens (input + output)"] == ["6", "165", "440", "550", "1210"]
    # The failed model call records no cost: five tasks with one, $0.01 a turn.
    assert usage["cost (USD)"] == ["5", "0.0200", "0.0420", "0.0500", "0.1100"]
    slowest = _table(diag, "slowest")
    assert len(slowest) == 5
    times = [float(row[2]) for row in slowest]
    assert times == sorted(times, reverse=True)
    assert all(len(_links(row[0])) == 1 for row in slowest)


def test_an_errors_only_run_says_why_each_plot_is_missing(document: str) -> None:
    errs = _section(document, "errs · demo")
    assert "<img" not in errs
    reasons = re.findall(r'<figure class="noplot" data-plot="(\w+)"><p class="noplot">(.*?)</p>', errs)
    assert reasons == [
        (name, "No task was evaluated: every task of every model ended in an error.")
        for name in ("accuracy", "categories", "cost")
    ]
    assert [(row[0], row[1]) for row in _table(errs, "outcomes")][-1] == ("infrastructure error", "2")
    (errors,) = _table(errs, "errors")
    assert _text(errors[1]) == "model call failed: down" and errors[2] == "2"
    assert sorted(text for _, text in _links(errors[3])) == ["count-errors a1", "fix-calc a1"]


def test_a_token_and_cost_outlier_and_framework_time_are_flagged(document: str) -> None:
    """The flags only the whole run's distribution (cost_outliers) or the attempt's time (time_split)
    decide, each linked to its attempt with what the analyzer measured."""
    flags = {row[1]: row for row in _table(_section(document, "slow · demo"), "flags")}
    outliers, split = flags["cost_outliers"], flags["time_split"]
    assert (outliers[2], outliers[3]) == ("1", "5") and (split[2], split[3]) == ("1", "5")
    assert _links(outliers[5]) == [("hungry_files.json", "hungry a1")]
    assert "tokens 110000, cost_usd 10.0, over tokens+cost" in outliers[5]
    assert _links(split[5]) == [("slow-check_files.json", "slow-check a1")]
    framework = re.search(r"framework_s ([0-9.]+)", split[5])
    assert framework is not None and float(framework.group(1)) >= 5.0


def test_a_long_task_table_keeps_what_went_wrong(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_TASK_ROWS the per-task table shows the tasks not every model solved first and says how many
    it left out (a sweep of 100,000 tasks made a 15 MB page and 600 MB of memory in the metrics step)."""
    monkeypatch.setattr(report, "MAX_TASK_ROWS", 4)
    section = _section(build_report(results), "diag · demo")
    shown = [_text(row[0]) for row in _table(section, "tasks")]
    unsolved = {"extract-column", "fix-calc", "sort-unique"}
    assert len(shown) == 4 and unsolved < set(shown), shown
    assert "The table shows 4 of 6 tasks" in section
