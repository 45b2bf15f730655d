"""The trajectory viewer (trajectory.py): one static page per attempt, built from a real run.

One --direct run of the tool agent with the scripted model makes four attempts: a correct one (a reply
with a `<script>` in it, a secret-looking value, an output long enough to be kept as a blob), a wrong one
flagged for reward hacking at its step, one that ends in an error (the endpoint fails) and one that hits
max_turns (a loop of `ls`). A fork of the wrong attempt and a replay of the correct one give a lineage and
a replay to show. The browser part opens a page from disk in headless Chromium (needs /usr/bin/chromium
and the playwright Python package; skipped with the reason otherwise).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import offline_page, run_cli
from scripted_agent import SOLUTION, bash, submit, sweep_file

from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.reporting.report import write_report
from agentcompass_dagster.runtime.store.layout import TASK_RESULTS_FILE
from agentcompass_dagster.reporting.trajectory import trajectory_page_path, write_trajectory_pages
from agentcompass_dagster.reporting.trajectory_data import EDGE_CHARS, load_trajectory

SECRET = "sk-proj-" + "Q7x" * 12
LONG = "seq 1 30000; echo OPENAI_API_KEY=" + SECRET
TURNS: dict[str, list[dict[str, Any]]] = {
    "count-errors": [
        {**bash(LONG), "content": "<script>alert('x')</script> let me look"},
        bash(f"echo token={SECRET}"),
        bash(SOLUTION),
        submit(),
    ],
    "create-hello": [bash("echo 1 > reward.txt"), submit()],
    "crlf-to-lf": [{"fail": "endpoint exploded <b>"}],
    "extract-column": [bash("ls")] * 6,
}


def _step(html: str, index: int) -> str:
    """The markup of one step's block."""
    match = re.search(rf'<div class="step [^"]*" id="step-{index}">(.*?)\n</div>', html, re.S)
    assert match, f"no step {index}"
    return match.group(1)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trajectory")
    models = [
        {"id": "solver", "provider": "scripted", "params": {"turns": TURNS}},
        {"id": "solver-b", "provider": "scripted", "params": {"turns": {"create-hello": [submit("b")] * 3}}},
    ]
    assert run_cli("run", sweep_file(directory, TURNS, name="lab", models=models[:1], max_turns=4), "--direct") == 3
    run_dir = next((directory / "results" / "lab").rglob("run_info.json")).parent
    assert run_cli("replay", run_dir, "--task", "count-errors") == 0
    both = sweep_file(directory, TURNS, name="both", models=models, max_turns=4)
    assert (
        run_cli("fork", run_dir, "--task", "create-hello", "--model", "solver-b", "--sweep", both, "--checkpoint", 2)
        == 0
    )
    return run_dir


@pytest.fixture(scope="module")
def pages(run: Path) -> dict[tuple[str, int], Path]:
    return write_trajectory_pages(run, run.parents[4] / "report")


def test_one_page_per_attempt_at_its_stable_path(run: Path, pages: dict[tuple[str, int], Path]) -> None:
    out = run.parents[4] / "report"
    assert sorted(pages) == [(task, 1) for task in sorted(TURNS)]
    for (task, attempt), page in pages.items():
        assert page == trajectory_page_path(out, run, task, attempt) and page.is_file()
        assert page.relative_to(out).parts[:5] == ("trajectories", "lab", "demo", "solver", run.name)


def test_a_correct_attempt_shows_its_turns_commands_and_outputs(pages: dict[tuple[str, int], Path]) -> None:
    html = pages[("count-errors", 1)].read_text()
    assert 'class="verdict correct"' in html and "How many log lines have the level" in html  # the prompt
    reply = _step(html, 2)
    assert "Turn 0 · model" in reply and "100 in / 10 out tokens" in reply and "stop: tool_calls" in reply
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in reply and "<script>" not in html
    command = _step(html, 3)
    assert "exit code <span" in command and "$ seq 1 30000; echo OPENAI_API_KEY=" in command
    # The long output: folded to its head and tail, the whole redacted blob one click away.
    assert '<details class="output">' in command and "1\n2\n3\n" in command
    link = re.search(r'<a class="full" href="([^"]+)">full output</a>', command)
    assert link is not None
    full = (pages[("count-errors", 1)].parent / link.group(1)).read_text()
    assert full.startswith("1\n2\n3\n") and "\n29999\n30000\n" in full and "OPENAI_API_KEY=[REDACTED]" in full
    assert len(command) < 4 * EDGE_CHARS + 2000
    assert "checkpoint 2" in command and 'id="checkpoints"' in html and 'id="replays"' in html
    # Issue #40: analyzer results in words, not Python's values ("gave_up False", "patterns []").
    findings = html.split('id="findings"', 1)[1].split("</section>", 1)[0]
    assert "<td>gave up: no</td>" in findings and "patterns: none" in findings
    assert "False" not in findings and "[]" not in findings
    # Issue #40: the page's step count and trajectory_stats' are one number, and a call counts once (four
    # replies each asking for one call, four calls run).
    heading = re.search(r"<h2>Steps \((\d+)\)</h2>", html)
    assert heading is not None and heading.group(1) == "8"
    assert "<td>steps: 8, tool calls: 4, " in findings, findings


def test_nothing_secret_or_live_anywhere_in_the_pages(run: Path, tmp_path: Path) -> None:
    """Redacted like every artifact, also when the log kept its blob unredacted (log_redacted off)."""
    copy = tmp_path / "lab" / "demo" / "solver" / run.name
    shutil.copytree(run, copy, symlinks=True)
    (blob,) = (copy / ".durable" / "count-errors@1" / "blobs").iterdir()
    blob.write_text(blob.read_text() + f"\nAWS_SECRET_ACCESS_KEY={SECRET}\n")
    out = tmp_path / "report"
    written = write_trajectory_pages(copy, out)
    files = [path for path in out.rglob("*") if path.is_file()]
    assert len(files) > len(written)  # the pages and the full output
    for path in files:
        text = path.read_text()
        assert SECRET not in text and "<script>alert" not in text, path
    assert "AWS_SECRET_ACCESS_KEY=[REDACTED]" in "".join(p.read_text() for p in files if p.suffix == ".txt")


def test_wrong_error_and_limit_attempts(pages: dict[tuple[str, int], Path]) -> None:
    wrong = pages[("create-hello", 1)].read_text()
    assert 'class="verdict wrong"' in wrong and "FAIL: directory out/ does not exist" in wrong
    flagged = _step(wrong, 3)
    assert 'data-analyzer="reward_hacking">⚑ reward_hacking: reward_write: wrote reward.txt' in flagged
    assert 'class="step tool_call flagged" id="step-3"' in wrong and '<a href="#step-3">step 3</a>' in wrong

    error = pages[("crlf-to-lf", 1)].read_text()
    assert 'class="verdict error"' in error and "endpoint exploded &lt;b&gt;" in error
    assert "Turn 0 · model · aborted" in error

    limit = pages[("extract-column", 1)].read_text()
    assert '<section id="limit"' in limit and "limit max_turns=4 reached: 4 model calls used" in limit
    assert limit.count("⚑ loops: loop: this command ran 4 times in a row") == 4


def test_task_results_hold_the_limit_an_attempt_hit(run: Path) -> None:
    """What the report's per-task table shows under a limit-hit outcome."""
    import pandas as pd

    rows = pd.read_parquet(run / TASK_RESULTS_FILE, columns=["task_id", "limit"])
    assert sorted(rows["task_id"]) == sorted(TURNS)  # one attempt each: only one hit a limit
    assert rows.set_index("task_id")["limit"].dropna().to_dict() == {
        "extract-column": "limit max_turns=4 reached: 4 model calls used"
    }


def test_the_model_of_a_fork_holds_its_lineage_and_inherited_steps(run: Path) -> None:
    fork_dir = next(p.parent for p in run.parents[3].rglob("run_info.json") if ".forks" in str(p))
    trajectory = load_trajectory(fork_dir, "create-hello", 1)
    assert trajectory.lineage is not None and trajectory.lineage.parent_run_id == run.name
    assert (trajectory.lineage.model, trajectory.lineage.checkpoint_seq) == ("solver-b", 2)
    assert [step.inherited for step in trajectory.steps if step.kind == "model_call"] == [True, False]
    assert trajectory.final_answer == "b"
    html = next(iter(write_trajectory_pages(fork_dir, run.parents[4] / "report-fork").values())).read_text()
    assert '<section id="lineage">' in html and f"fork of run {run.name}" in html and "solver → solver-b" in html
    with pytest.raises(UserError, match="no detail of task 'nope'"):
        load_trajectory(run, "nope", 1)


def test_missing_pieces_leave_their_sections_out(run: Path, tmp_path: Path) -> None:
    """No activity log or blob, a step of an unknown shape, a lineage, analysis results and a summary of
    shapes this version does not know: a page all the same."""
    bare = tmp_path / "lab" / "demo" / "solver" / run.name
    shutil.copytree(run / "details", bare / "details")
    (bare / "run_info.json").write_text(json.dumps({"request": {"lineage": {"kind": "fork"}}}))
    (bare / "analysis_summary.json").write_text(json.dumps({"loops": {"flagged": 3}, "gave_up": [1]}))
    detail = next((bare / "details").glob("count-errors*.json"))
    data = json.loads(detail.read_text())
    data["attempts"]["1"]["analysis_result"] = {
        "reward_hacking": {"evidence": ["x", {"step": "y"}]},
        "loops": {"command": "ls", "max_repeats": "many"},
    }
    data["attempts"]["1"]["meta"]["analysis_errors"] = ["not a mapping"]
    data["attempts"]["1"]["trajectory"] += [
        {"type": "from-the-future", "tool_calls": "not a list"},
        {"type": "model_call", "usage": "not a mapping"},
    ]
    detail.write_text(json.dumps(data))
    trajectory = load_trajectory(bare, "count-errors", 1)
    assert trajectory.checkpoints == [] and trajectory.model is None and trajectory.lineage is None
    assert [(f.analyzer, f.flagged, f.steps) for f in trajectory.findings] == [
        ("reward_hacking", False, []),
        ("loops", False, []),
    ]
    assert [f.summary for f in trajectory.findings] == ["", "command: ls, max repeats: many"]
    future, broken = trajectory.steps[-2:]
    assert future.kind == "from-the-future" and "not a list" in (future.text or "")
    assert broken.kind == "model_call" and broken.usage is None and "not a mapping" in (broken.text or "")
    long_output = next(step for step in trajectory.steps if step.command and step.command.startswith("seq"))
    assert "characters cut ..." in (long_output.output or "")  # the recorded, bounded output
    html = write_trajectory_pages(bare, tmp_path / "report")[("count-errors", 1)].read_text()
    assert 'id="checkpoints"' not in html and 'id="lineage"' not in html and 'class="verdict correct"' in html


def test_a_second_report_renders_again_only_the_pages_of_what_changed(run: Path, tmp_path: Path) -> None:
    """`agentcompass report` run again keeps a page newer than what it is made from (the same file, not
    redacted and written again) and renders the page of a detail that changed since."""
    results = tmp_path / "results"
    shutil.copytree(run.parents[3], results, symlinks=True)
    copy = results / run.relative_to(run.parents[3])
    write_report(results)
    kept, changed = (trajectory_page_path(results, copy, task, 1) for task in ("count-errors", "create-hello"))
    before = {page: (page.stat().st_ino, page.stat().st_mtime_ns) for page in (kept, changed)}
    detail = next((copy / "details").glob("create-hello*.json"))
    data = json.loads(detail.read_text())
    data["attempts"]["1"]["final_answer"] = "changed since"
    detail.write_text(json.dumps(data))
    write_report(results)
    assert (kept.stat().st_ino, kept.stat().st_mtime_ns) == before[kept]
    assert changed.stat().st_ino != before[changed][0] and "<pre>changed since</pre>" in changed.read_text()


@pytest.mark.parametrize(
    "task_id", ["../../etc/passwd", "<img src=x onerror=alert(1)>", "a b", "a_b", "x" * 300, "%41", "-rf", ".hidden"]
)
def test_page_paths_are_safe_names_for_hostile_task_ids(tmp_path: Path, task_id: str) -> None:
    run_dir = tmp_path / "results" / "s" / "b" / "m" / "r1"
    page = trajectory_page_path(tmp_path / "out", run_dir, task_id, 2)
    relative = page.relative_to(tmp_path / "out")
    assert relative.parts[:5] == ("trajectories", "s", "b", "m", "r1") and len(relative.parts) == 6
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,130}__a2\.html", page.name), page.name
    assert page == trajectory_page_path(tmp_path / "out", run_dir, task_id, 2)
    others = {"a b": "a_b", "a_b": "a b", "%41": "A"}
    if task_id in others:
        assert page != trajectory_page_path(tmp_path / "out", run_dir, others[task_id], 2)


def test_a_flagged_step_in_headless_chromium(pages: dict[tuple[str, int], Path], tmp_path: Path) -> None:
    """Opened from disk, the page makes no request beyond its own file and logs no error; the flagged
    step carries its flag, and the findings table links to it."""
    with offline_page() as (page, seen):
        from playwright.sync_api import expect  # offline_page skipped the test if it is missing

        page.goto(pages[("create-hello", 1)].resolve().as_uri(), wait_until="load")
        page.click('#findings a[href="#step-3"]')
        flag = page.locator("#step-3 .flag")
        expect(flag).to_have_text("⚑ reward_hacking: reward_write: wrote reward.txt")
        expect(flag).to_be_in_viewport()
        colour = page.eval_on_selector("#step-3", "e => getComputedStyle(e).borderLeftColor")
        page.screenshot(path=str(tmp_path / "trajectory.png"), full_page=True)
    assert colour == "rgb(221, 51, 51)" and not seen, (colour, seen)
    assert (tmp_path / "trajectory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
