"""What the runtime does of a multi-step task's steps beyond running each (attempt.py): the plan of a
step's run, and the steps' runs joined into the attempt's."""

from __future__ import annotations

from agentcompass_dagster.contracts.records import ExecutionPlan, RunResult, TaskStep


def step_plan(plan: ExecutionPlan, step: TaskStep) -> ExecutionPlan:
    """The plan of one step's run: the agent's wall time bounded by the step's own timeout too."""
    wall = plan.agent_limits.max_wall_s
    if step.agent_timeout_s is None or (wall is not None and wall <= step.agent_timeout_s):
        return plan
    return plan.model_copy(
        update={"agent_limits": plan.agent_limits.model_copy(update={"max_wall_s": step.agent_timeout_s})}
    )


def joined(before: RunResult, step: RunResult, name: str) -> RunResult:
    """The runs of a multi-step task's steps so far as one: their trajectories in order, each after a
    step marker, usage and time added up, the last step's outcome."""
    return step.model_copy(
        update={
            "trajectory": [*before.trajectory, {"type": "step", "name": name}, *step.trajectory],
            "usage": before.usage + step.usage,
            "duration_s": before.duration_s + step.duration_s,
            "artifacts": {**before.artifacts, **({name: step.artifacts} if step.artifacts else {})},
        }
    )
