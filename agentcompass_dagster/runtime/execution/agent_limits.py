"""The agent's limits of one attempt (``execution.limits``: turns, tokens, cost, wall time), enforced by
the framework around what the harness session is handed, so that a harness cannot exceed it whether it
checks it or not:

- ``LimitedModel``, the session's model (and its harness's): before each ``complete`` the limits are
  checked over every call the attempt made, in this process and in the processes that worked on it
  before, and a call past a limit is refused with ``LimitExceeded``; ``max_wall_s`` cuts a call in
  flight; after each call its usage counts. Each call is watched while in flight (``calls``).
- ``LimitedEnvironment``, the session's environment: a command's timeout is capped at the wall time
  left, and no command runs once a limit is reached.
- ``AttemptLimits.guard``: the runtime's stop of the session's ``run`` at ``max_wall_s``, and GRACE_S after
  the limits refused something, so a harness that goes on regardless is stopped.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from agentcompass_dagster.contracts.environment import Caller, DelegatingSession, EnvironmentSession, ExecResult
from agentcompass_dagster.contracts.harness import Harness
from agentcompass_dagster.contracts.model import CallContext, LimitExceeded, Model, ModelTurn
from agentcompass_dagster.contracts.records import AgentLimits, LimitHit, LimitName, NetworkPolicy, RunResult, Usage
from agentcompass_dagster.durable.activity import read_activity
from agentcompass_dagster.runtime.execution.model_calls import CallsInFlight
from agentcompass_dagster.plugins.models.usage import turn_usage, usage_totals

T = TypeVar("T")
H = TypeVar("H", bound=Harness)

# How long a harness has, once the limits refused it something (or its wall time is up), to return what
# it recorded before the runtime stops it: time to write a trajectory, not to do more work.
GRACE_S = 5.0
# A call or command refused again (the harness went on after the first refusal) is answered after this
# pause, so that a harness looping on refusals waits for its stop instead of spinning until then.
REFUSED_AGAIN_PAUSE_S = 0.1


class AttemptLimits:
    """What one attempt may still spend, and the limit that stopped it (``hit``). ``activity_log`` is
    the attempt's log when its harness is durable: the usage and time it records from earlier processes
    count too (R-RESUME-3)."""

    def __init__(self, limits: AgentLimits, activity_log: Path | None = None) -> None:
        self.limits = limits
        self.activity_log = activity_log
        self.hit: LimitHit | None = None
        # Every completed model call's usage: the earlier processes' first, once read, then this one's.
        self.usages: list[Usage] = []
        self.calls = CallsInFlight()
        self._started_at = time.time()
        self._started = time.monotonic()
        self._before: float | None = None
        self._stop: asyncio.Timeout | None = None
        self._attempt_deadline: float | None = None
        self._hit_at: float | None = None

    def _spent_before(self) -> float:
        """The time earlier processes spent on the attempt, their calls' usage added to ``usages``; read
        from the activity log when first needed, since by then the harness has decided whether it
        continues that log or sets it aside and starts over (``durable.resume``). Records written before
        this attempt began here are the earlier processes' (or a fork's seed)."""
        if self._before is None:
            earlier = (
                [r for r in read_activity(self.activity_log) if r.at < self._started_at]
                if self.activity_log is not None
                else []
            )
            self._before = earlier[-1].elapsed_s if earlier else 0.0
            self.usages[:0] = [
                Usage.model_validate(r.data["usage"])
                for r in earlier
                if r.kind == "model_call" and r.status == "completed"
            ]
            self._reschedule()
        return self._before

    def elapsed(self) -> float:
        return self._spent_before() + time.monotonic() - self._started

    def wall_left(self) -> float | None:
        return None if self.limits.max_wall_s is None else max(0.0, self.limits.max_wall_s - self.elapsed())

    def _reached(self, *, calls: bool) -> LimitHit | None:
        """The first limit reached: of them all before a model call (``calls``), else the wall time."""
        used: dict[LimitName, float] = {"max_wall_s": self.elapsed()}
        if calls:
            total = usage_totals(self.usages)[0]
            used = {
                "max_turns": len(self.usages),
                "max_tokens": total.input_tokens + total.output_tokens,
                "max_cost_usd": sum(u.cost_usd or 0.0 for u in self.usages),
                **used,
            }
        for name, amount in used.items():
            allowance = getattr(self.limits, name)
            if allowance is not None and amount >= allowance:
                return LimitHit(limit=name, allowance=allowance, used=round(amount, 6))
        return None

    async def admit(self, *, call: bool) -> float | None:
        """Before a model call (``call``) or a command: refuse it once a limit is reached; else the
        seconds of wall time it may take (None without max_wall_s)."""
        hit = self.hit or self._reached(calls=call)
        if hit is not None:
            if self.hit is not None:
                await asyncio.sleep(REFUSED_AGAIN_PAUSE_S)
            self._record(hit)
            raise LimitExceeded(hit)
        return self.wall_left()

    def cut(self) -> LimitExceeded:
        """max_wall_s cut the model call in flight."""
        assert self.limits.max_wall_s is not None
        self._record(LimitHit(limit="max_wall_s", allowance=self.limits.max_wall_s, used=round(self.elapsed(), 3)))
        assert self.hit is not None
        return LimitExceeded(self.hit, in_flight=True)

    def overrun(self) -> LimitHit | None:
        """At the runtime's stop of ``run``: the limit that stopped it (the wall time, for a harness that
        never asked the limits), or None when the attempt timeout did."""
        hit = self.hit or self._reached(calls=False)
        if hit is not None:
            self._record(hit)
        return hit

    def _record(self, hit: LimitHit) -> None:
        if self.hit is None:
            self.hit = hit
            self._hit_at = time.monotonic()
            self._reschedule()

    async def guard(self, run: Awaitable[T], timeout_s: float | None) -> T:
        """Await the session's ``run`` until it returns; TimeoutError when the attempt timeout
        (``timeout_s``) passes, the wall time is up, or GRACE_S after a limit stopped the attempt."""
        self._attempt_deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            async with asyncio.timeout(None) as self._stop:
                self._reschedule()
                result = await run
        finally:
            self._stop = None
        return result

    def _reschedule(self) -> None:
        """Move the stop of ``run`` to the earliest of its deadlines. The wall time counts what earlier
        processes spent only once that is read (it may still be set aside)."""
        if self._stop is None or self._stop.expired():
            return
        now = time.monotonic()
        deadlines = [] if self._attempt_deadline is None else [self._attempt_deadline]
        if self._hit_at is not None:
            deadlines.append(self._hit_at + GRACE_S)
        if self.limits.max_wall_s is not None:
            deadlines.append(self._started + self.limits.max_wall_s - (self._before or 0.0) + GRACE_S)
        # The deadlines are on time.monotonic; the event loop schedules on its own clock.
        loop_now = asyncio.get_running_loop().time()
        self._stop.reschedule(min(deadlines) - now + loop_now if deadlines else None)

    def settle(self, result: RunResult) -> None:
        """The session's result with the limit hit, whatever the harness returned: an
        outcome of the attempt, and an error reported after it is the agent's failure (scored 0), never
        an infrastructure error, which would have the attempt run again."""
        if self.hit is not None:
            result.limit = self.hit
            if result.error is not None:
                # What the harness said of its end may not name the limit (a command killed at it).
                failure = result.error if self.hit.limit in result.error else f"{self.hit.message}: {result.error}"
                result.failure, result.error = failure, None
            result.status = "failed" if result.failure is not None else "completed"


class LimitedModel(Model):
    """The request's model under one attempt's limits."""

    def __init__(self, inner: Model, limits: AttemptLimits) -> None:
        self.inner = inner
        self.limits = limits
        self.config = inner.config
        self.price = inner.price

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> ModelTurn:
        left = await self.limits.admit(call=True)
        try:
            async with asyncio.timeout(left) as cut:
                with self.limits.calls.watching(self.inner):
                    turn = await self.inner.complete(messages, tools, context)
        except TimeoutError:
            if not cut.expired():
                raise  # the model's own, not the limits'
            raise self.limits.cut() from None
        self.limits.usages.append(turn_usage(turn.usage, turn.cost_usd, self.inner.price))
        return turn


class LimitedEnvironment(DelegatingSession):
    """The attempt's environment session as its harness sees it: commands are bounded by the limits'
    wall time, the network policy and the session's end are the runtime's; everything else is the
    session's own."""

    def __init__(self, inner: EnvironmentSession, limits: AttemptLimits) -> None:
        super().__init__(inner)
        self.limits = limits

    async def exec(
        self,
        command: str,
        *,
        timeout_s: float | None = None,
        cwd: str | None = None,
        caller: Caller = Caller.agent,
        label: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        left = await self.limits.admit(call=False)
        cut = left is not None and (timeout_s is None or left < timeout_s)
        if cut:
            timeout_s = left
        result = await self.inner.exec(command, timeout_s=timeout_s, cwd=cwd, caller=caller, label=label, env=env)
        if cut and result.timed_out:
            # The wall time, not the command's own timeout, ended it: the attempt's limit is reached.
            self.limits.overrun()
        return result

    async def set_network_policy(self, policy: NetworkPolicy) -> None:
        raise PermissionError("the runtime sets each phase's network policy (execution.network); a harness may not")

    async def close(self) -> None:
        """The runtime closes the session once the attempt is evaluated: a harness that closed it first
        would turn its own evaluation into an infrastructure error, a task out of the denominator."""


def limited_harness(harness: H, limits: AttemptLimits) -> H:
    """The harness as one attempt sees it: a shallow copy whose ``model`` is the attempt's limited
    model, so a session that calls ``self.harness.model`` is held to the limits like one that calls
    ``self.model``. The harness itself is shared by every attempt of the request, each with its limits."""
    view = copy.copy(harness)
    view.model = LimitedModel(harness.model, limits)
    return view
