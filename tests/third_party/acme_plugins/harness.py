"""acme-oneshot: one model call per attempt. The reply is a shell command, run once in the task's
environment as the agent; what it prints is the final answer. The framework holds the agent's budget,
so this harness counts nothing itself."""

from __future__ import annotations

from agentcompass_dagster.contracts import CallContext, CommandStep, Harness, HarnessSession, RunResult
from agentcompass_dagster.contracts import MessageStep, ModelCallStep, TrajectoryStep

SYSTEM = "Reply with one bash command, and nothing else, that does the task in the current directory."
COMMAND_TIMEOUT_S = 120.0


class OneShotSession(HarnessSession):
    async def run(self) -> RunResult:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.prepared.input}]
        context = CallContext(task_id=self.prepared.task.id, attempt=self.plan.attempt, turn=0)
        turn = await self.harness.model.complete(messages, [], context)
        steps: list[TrajectoryStep] = [MessageStep(role=m["role"], content=m["content"]) for m in messages]
        steps.append(
            ModelCallStep(turn=0, content=turn.content, stop_reason=turn.stop_reason, duration_s=turn.duration_s)
        )
        command = (turn.content or "").strip()
        if not command:
            return RunResult(status="failed", failure="the model replied without a command", trajectory=steps)
        ran = await self.env.exec(command, timeout_s=COMMAND_TIMEOUT_S)
        done = dict(exit_code=ran.exit_code, output=ran.output, timed_out=ran.timed_out, duration_s=ran.duration_s)
        steps.append(CommandStep(command=command, turn=0, **done))
        return RunResult(final_answer=ran.stdout.strip(), trajectory=steps)


class OneShotHarness(Harness):
    session_class = OneShotSession
    requires_model = True
