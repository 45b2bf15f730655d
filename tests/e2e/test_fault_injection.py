"""R-FAULT-1: fault-injection experiments (parent killed, environment lost, tool interrupted) recover.

One trial of every scenario of ``perf/fault_injection.py``, through the script's own code: a real
sweep subprocess killed with SIGKILL at the scenario's point, then ``agentcompass resume`` as a subprocess.
Each must recover (resume exits 0, the answer is correct and the completed steps equal an uninterrupted
run's) without repeating a completed model turn or a completed non-replay-safe command."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "perf"))

import fault_injection


# The checkpoint scenario's own script (the many files that make its capture last) has a baseline of its
# own: it runs beside the others, each group in a thread of its own (the trials are subprocesses in
# directories of their own), so the test takes the longer group's time, not the sum.
GROUPS = [
    sorted(fault_injection.MANY_FILES),
    [s for s in fault_injection.SCENARIOS if s not in fault_injection.MANY_FILES],
]


@pytest.mark.slow
def test_every_fault_scenario_recovers_without_repeating_completed_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The script polls for its kill points every 0.5 ms, which on a busy machine takes the CPU from the
    # run it waits for; every 2 ms still lands a kill well inside the 100 ms sleeps it aims at.
    monkeypatch.setattr(fault_injection, "POLL_S", 0.002)
    # 200 files make the checkpoint's capture last long enough to be killed in (the script's 2000 are
    # for measuring); one baseline run per script, no warm-up run (only the timings need warm caches).
    with ThreadPoolExecutor(len(GROUPS)) as pool:
        groups = list(
            pool.map(
                lambda group: fault_injection.run_experiment(
                    tmp_path,
                    group,
                    trials=1,
                    seed=0,
                    script=fault_injection.Script(files=200),
                    keep=False,
                    warm_up=False,
                ),
                GROUPS,
            )
        )
    by_name = {t.scenario: t for group in groups for t in group}
    trials = [by_name[s] for s in fault_injection.SCENARIOS]
    assert [t.scenario for t in trials] == list(fault_injection.SCENARIOS)
    for trial in trials:
        assert trial.resumable, f"{trial.scenario}: the run finished before the kill"
        assert trial.recovered, f"{trial.scenario}: {trial.problems}"
        assert trial.repeated_completed_commands == trial.repeated_other_commands == 0, trial.scenario
        assert trial.repeated_completed_turns == trial.repeated_other_turns == 0, trial.scenario
        # "finished": the kill came after the agent had ended, before its result was written.
        assert trial.classification in ("attached", "rebuilt", "finished"), trial.scenario
    assert by_name["environment-lost"].classification == "rebuilt"
    assert by_name["parent-during-model-call"].resent_model_calls == by_name["parent-during-model-call"].in_window
