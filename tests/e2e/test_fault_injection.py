"""R-FAULT-1: fault-injection experiments (parent killed, environment lost, tool interrupted) recover.

One trial of every scenario of ``perf/fault_injection.py``, through the script's own code: a real
sweep subprocess killed with SIGKILL at the scenario's point, then ``agentcompass resume`` as a subprocess.
Each must recover (resume exits 0, the answer is correct and the completed steps equal an uninterrupted
run's) without repeating a completed model turn or a completed non-replay-safe command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "perf"))

import fault_injection


@pytest.mark.slow
def test_every_fault_scenario_recovers_without_repeating_completed_work(tmp_path: Path) -> None:
    trials = fault_injection.run_experiment(tmp_path, list(fault_injection.SCENARIOS), trials=1, seed=0,
                                            script=fault_injection.Script(files=1000), keep=False)
    assert [t.scenario for t in trials] == list(fault_injection.SCENARIOS)
    for trial in trials:
        assert trial.resumable, f"{trial.scenario}: the run finished before the kill"
        assert trial.recovered, f"{trial.scenario}: {trial.problems}"
        assert trial.repeated_completed_commands == trial.repeated_other_commands == 0, trial.scenario
        assert trial.repeated_completed_turns == trial.repeated_other_turns == 0, trial.scenario
        # "finished": the kill came after the agent had ended, before its result was written.
        assert trial.classification in ("attached", "rebuilt", "finished"), trial.scenario
    by_name = {t.scenario: t for t in trials}
    assert by_name["environment-lost"].classification == "rebuilt"
    assert by_name["parent-during-model-call"].resent_model_calls == by_name["parent-during-model-call"].in_window
