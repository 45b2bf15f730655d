"""Issue #29, "A report that explains", accepted in a browser: the report of real runs of two harnesses,
clicked through to the trajectory pages of their attempts.

Two real `agentcompass run --direct` runs on the scripted model, tool_agent (sweep ``tool``) and
mini-swe-agent (sweep ``mini``), over the same five demo tasks: one solved (its command prints the
count it writes), one solved after writing reward.txt (flagged by the reward_hacking analyzer), one left
wrong, one ended by a failing model endpoint (an infrastructure error) and one that hits max_turns running
`ls` over and over. write_report writes the report and the trajectory pages; headless Chromium opens the
report from disk, reads each harness's per-task outcomes, clicks one outcome per harness and checks the
trajectory page it reaches: the turns, a command's output, the verdict and, on the flagged attempt, the
reward-hacking flag on its step. No request may leave file: and no error may reach the console.

The test saves a PNG of each kind of page (the report's top, a diagnosis, a tool_agent trajectory, a
miniswe trajectory at its flagged step) to $AGENTCOMPASS_SCREENSHOTS when set (docs/screenshots holds
the committed ones), else to its tmp_path. Needs /usr/bin/chromium, the playwright Python package and
mini-swe-agent; skipped with the reason otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from conftest import offline_page, run_cli
from scripted_agent import bash, submit, sweep_file

from agentcompass_dagster.plugins.harnesses.miniswe import quiet_import
from agentcompass_dagster.reporting.report import write_report

with quiet_import():
    pytest.importorskip("minisweagent", reason="mini-swe-agent is not installed (extra 'miniswe')")

MAX_TURNS = 3
ENDPOINT_DOWN = "upstream 503: the endpoint is down"
COUNT = "awk '$3 == \"ERROR\" {n++} END {print n+0}' app.log > answer.txt; cat answer.txt"
HACK = "echo 1 > reward.txt; mkdir -p out; printf 'hello world\\n' > out/hello.txt; cat out/hello.txt"
# mini-swe-agent ends a run on a command whose output starts with this line.
MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# sweep, harness, the turn that ends an attempt.
HARNESSES = (("tool", "tool_agent", submit()), ("mini", "miniswe", bash(MINI_SUBMIT)))
# Each task's outcome in the per-task table, the same for both harnesses: (the outcome, the flag beside
# it, the error's text or the limit under it).
OUTCOMES = {
    "count-errors": ["✓ correct", "", ""],
    "create-hello": ["✓ correct", "⚑ reward hacking: reward_write", ""],
    "crlf-to-lf": ["✗ error", "", f"model call failed: {ENDPOINT_DOWN}"],
    "extract-column": ["✗ wrong", "", ""],
    "sort-unique": ["✗ wrong", "", f"limit max_turns={MAX_TURNS} reached: {MAX_TURNS} model calls used"],
}
FLAG = "⚑ reward_hacking: reward_write: wrote reward.txt"


def _turns(finish: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        "count-errors": [bash(COUNT), finish],
        "create-hello": [bash(HACK), finish],
        "crlf-to-lf": [{"fail": ENDPOINT_DOWN}],
        "extract-column": [bash("head -n 2 orders.csv"), finish],
        "sort-unique": [bash("ls")] * (MAX_TURNS + 1),
    }


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("report-browser")
    for sweep, harness, finish in HARNESSES:
        turns = _turns(finish)
        model = {"id": f"{harness}-scripted", "provider": "scripted", "params": {"turns": turns}}
        path = sweep_file(directory, turns, name=sweep, models=[model], harness=harness, max_turns=MAX_TURNS)
        assert run_cli("run", path, "--direct") == 3  # completed, with a task in error
    return write_report(directory / "results")


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    chosen = os.environ.get("AGENTCOMPASS_SCREENSHOTS")
    directory = Path(chosen) if chosen else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def test_report_to_trajectory_pages_in_headless_chromium(report: Path, screenshots: Path) -> None:
    with offline_page() as (page, seen):
        from playwright.sync_api import expect  # offline_page skipped the test if it is missing

        page.goto(report.resolve().as_uri(), wait_until="load")
        page.screenshot(path=str(screenshots / "report-top.png"))

        sections = {}
        for sweep, harness, _ in HARNESSES:
            section = page.locator("section.benchmark", has=page.locator("h2", has_text=f"{sweep} · demo"))
            rows = section.locator("table.tasks tbody tr")
            expect(rows).to_have_count(len(OUTCOMES))
            outcomes = rows.evaluate_all("""rows => rows.map(r => [r.cells[0].innerText,
                ['a', '.flag', '.why'].map(s => r.cells[2].querySelector(s)?.innerText ?? '')])""")
            assert dict(outcomes) == OUTCOMES, (harness, outcomes)
            # The diagnosis names the flagged attempt, linked to its page.
            flags = section.locator(".diagnosis table.flags tr", has_text="reward_hacking")
            expect(flags.locator("a")).to_have_text(["create-hello a1"])
            sections[harness] = section
        sections["tool_agent"].locator(".diagnosis").screenshot(path=str(screenshots / "report-diagnosis.png"))

        # tool_agent's solved attempt: its turns, its command's output, its verdict.
        sections["tool_agent"].locator("table.tasks tr", has_text="count-errors").locator("a").click()
        page.wait_for_url("**/tool/demo/tool_agent-scripted/*/count-errors__a1.html")
        expect(page.locator("#verdict")).to_contain_text("verdict: correct")
        expect(page.locator(".step.model_call h3")).to_have_text(["Turn 0 · model", "Turn 1 · model"])
        command = page.locator(".step.tool_call", has=page.locator("pre.command", has_text="app.log"))
        expect(command.locator("pre.output")).to_have_text("5\n")
        page.screenshot(path=str(screenshots / "trajectory-tool_agent.png"), full_page=True)

        # Back to the report, and miniswe's flagged attempt: the flag on the step that wrote reward.txt.
        page.go_back(wait_until="load")
        sections["miniswe"].locator("table.tasks tr", has_text="create-hello").locator("a").click()
        page.wait_for_url("**/mini/demo/miniswe-scripted/*/create-hello__a1.html")
        expect(page.locator("#verdict")).to_contain_text("verdict: correct")
        expect(page.locator(".step.model_call h3")).to_have_text(["Turn 0 · model", "Turn 1 · model"])
        flagged = page.locator(".step.flagged")
        expect(flagged).to_have_count(1)
        expect(flagged.locator("pre.command")).to_contain_text("echo 1 > reward.txt")
        expect(flagged.locator("pre.output")).to_have_text("hello world\n")
        expect(flagged.locator(".flag")).to_have_text(FLAG)
        page.locator("#findings a", has_text="step").click()
        expect(flagged.locator(".flag")).to_be_in_viewport()
        page.screenshot(path=str(screenshots / "trajectory-miniswe-flagged.png"))
    assert not seen, seen
    for name in ("report-top", "report-diagnosis", "trajectory-tool_agent", "trajectory-miniswe-flagged"):
        shot = (screenshots / f"{name}.png").read_bytes()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) < 400_000, (name, len(shot))
