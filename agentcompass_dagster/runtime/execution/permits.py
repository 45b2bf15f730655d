"""Process-global limits on external pressure (R-LIMIT-1).

Provider capacity: at most N concurrent attempts per Environment id, held around one whole attempt try
(released and re-acquired when a whole attempt reruns). Open rate: at most Q ``Environment.open`` calls
per second per provider. Both are keyed process-wide, because several orchestrations (and event loops,
e.g. Dagster steps in threads) may share one provider; 0 disables either. They are built on threading
primitives and wake waiters through their own loop, so they are safe across event loops.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import AsyncIterator, Protocol

from agentcompass_dagster.contracts.environment import Environment, EnvironmentSession
from agentcompass_dagster.contracts.records import ExecutionPlan, TaskSpec
from agentcompass_dagster.contracts.errors import UserError


class Capacity:
    """A counting semaphore usable from any event loop."""

    def __init__(self, permits: int) -> None:
        self.permits = permits
        self._in_use = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_use < self.permits and not self._waiters:
                self._in_use += 1
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, future))
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))
                    raise
            if future.done() and not future.cancelled():
                # The permit reached us just as we were cancelled: pass it on.
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, future = self._waiters.popleft()
                if not loop.is_closed():
                    loop.call_soon_threadsafe(_grant, future, self)
                    return
            self._in_use -= 1


def _grant(future: asyncio.Future[None], capacity: Capacity) -> None:
    """Hand a permit to a waiter (the in-use count stays as it is); a waiter cancelled meanwhile
    passes it on."""
    if future.done():
        capacity.release()
    else:
        future.set_result(None)


class OpenRate:
    """Spaces calls at least 1/qps seconds apart, in arrival order."""

    def __init__(self, qps: float) -> None:
        self.interval = 1.0 / qps
        self._next = 0.0
        self._lock = threading.Lock()

    async def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        delay = slot - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


_capacities: dict[str, Capacity] = {}
_rates: dict[str, OpenRate] = {}
_registry_lock = threading.Lock()


def capacity_for(environment_id: str, permits: int) -> Capacity | None:
    if permits <= 0:
        return None
    with _registry_lock:
        capacity = _capacities.setdefault(environment_id, Capacity(permits))
        capacity.permits = permits
        return capacity


def open_rate_for(provider_id: str, qps: float) -> OpenRate | None:
    if qps <= 0:
        return None
    with _registry_lock:
        rate = _rates.setdefault(provider_id, OpenRate(qps))
        rate.interval = 1.0 / qps
        return rate


class TaskRefused(Exception):
    """The environment cannot run the task as it asks (``Environment.refusal``, or a network the task
    narrowed that the provider cannot hold): each attempt of the task ends with this line as its error,
    which no retry changes."""


async def open_session(environment: Environment, plan: ExecutionPlan, task: TaskSpec) -> EnvironmentSession:
    """The provider's ``open``, at no more than its declared rate (R-LIMIT-1): every opening of a session
    goes through here, so no provider can skip the limit, nor open a session for a task it refuses."""
    refusal = environment.refusal(task)
    if refusal is not None:
        raise TaskRefused(f"task {task.id!r}: {refusal}")
    if task.environment is not None and task.environment.network is not None:
        try:
            environment.validate_plan(plan)
        except UserError as exc:
            raise TaskRefused(f"task {task.id!r} may reach no network: {exc}") from None
    rate = open_rate_for(environment.config.provider_id, environment.config.open_qps)
    if rate is not None:
        await rate.wait()
    return await environment.open(plan, task)


@asynccontextmanager
async def attempt_permit(environment_id: str, permits: int) -> AsyncIterator[None]:
    """Hold one of the environment's capacity permits for the duration of one attempt try."""
    capacity = capacity_for(environment_id, permits)
    if capacity is None:
        yield
        return
    await capacity.acquire()
    try:
        yield
    finally:
        capacity.release()


class PermitSource(Protocol):
    """Where an attempt try gets its environment capacity permit. The runtime alone holds permits per
    process; the Dagster layer holds them in the instance, so a capacity holds across runs and hosts."""

    def hold(self, environment_id: str, permits: int) -> AbstractAsyncContextManager[None]: ...


class ProcessPermits:
    def hold(self, environment_id: str, permits: int) -> AbstractAsyncContextManager[None]:
        return attempt_permit(environment_id, permits)


PROCESS_PERMITS = ProcessPermits()
