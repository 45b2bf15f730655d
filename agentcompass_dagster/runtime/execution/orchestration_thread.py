"""An orchestration on a thread of its own, for a caller that must not wait for it (the Dagster step)."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref

from agentcompass_dagster.runtime.execution.interrupts import Interrupts
from agentcompass_dagster.runtime.execution.orchestrator import Orchestrator
from agentcompass_dagster.runtime.store.outcomes import OrchestrationResult

# How long a stop waits for the runtime's cleanup beyond the sweep's own cleanup grace.
STOP_SLACK_S = 5.0
# How soon a stop's wait sees an interrupt it counted.
JOIN_SLICE_S = 0.1


class OrchestrationThread:
    """An orchestration on a thread of its own, for a caller whose thread must stay free while tasks run
    (a Dagster step reports each task the moment it ends). ``cancel`` starts the cooperative cleanup of
    R-CLEAN-2; ``result`` then raises KeyboardInterrupt, as orchestrate does after a Ctrl-C."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self.orchestrator = orchestrator
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[OrchestrationResult] | None = None
        self._outcome: OrchestrationResult | BaseException | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"agentcompass-{orchestrator.id}", daemon=True)

    def start(self) -> OrchestrationThread:
        # The thread is a daemon (a caller stopped for good must not hang on it), so a process that exits
        # while it runs would cut it off mid-task: the step that should stop it may never resume (Dagster
        # raises an interrupt between two of its events, outside the step's code). At exit it is stopped
        # as a Ctrl-C stops it, and its run directories say so. threading's own exit hook, not atexit: that
        # one runs after concurrent.futures has refused new work, so the cleanup's threads could not start.
        ref = weakref.ref(self)

        def stop_at_exit() -> None:
            if (orchestration := ref()) is not None:
                orchestration.stop()

        # A private function of threading, which typeshed's stub leaves out.
        threading._register_atexit(stop_at_exit)  # type: ignore[attr-defined]
        self._thread.start()
        self._started.wait()
        return self

    def stop(self, reason: str = "interrupted before all tasks finished") -> None:
        """Cancel, grant the cleanup its grace, and mark every run directory still running cancelled,
        however the wait ends (in time, past the grace, or cut by another interrupt). The grace is granted
        once: a later stop (the one at exit, after the step's) only marks them."""
        self.cancel()
        try:
            if not self._stopping:
                self._stopping = True
                self._wait_unless_interrupted(self.orchestrator.cleanup_grace_s + STOP_SLACK_S)
        finally:
            self.orchestrator.abandon(reason)

    def _wait_unless_interrupted(self, timeout: float) -> None:
        """Wait for the orchestration to end, up to ``timeout``; in the main thread a SIGINT or SIGTERM
        meanwhile ends the wait. Counted here rather than left to the handler in place: Dagster's, when
        the stop runs between two of its events (the step's generator closed), only records it, and
        its raising one can raise into a weakref callback, where the exception is dropped; either way a
        second Ctrl-C waited out the grace and the worker was killed before marking its run."""
        if threading.current_thread() is not threading.main_thread():
            self.join(timeout)
            return
        deadline = time.monotonic() + timeout
        with Interrupts().counted() as interrupts:
            while not interrupts.count and time.monotonic() < deadline:
                if self.join(min(JOIN_SLICE_S, max(0.0, deadline - time.monotonic()))):
                    return

    def _run(self) -> None:
        async def main() -> OrchestrationResult:
            self._loop = asyncio.get_running_loop()
            self._main = asyncio.current_task()
            self._started.set()
            self.orchestrator.use_thread_pool()
            return await self.orchestrator.run()

        try:
            self._outcome = asyncio.run(main())
        except BaseException as exc:  # handed to the caller by result()
            self._outcome = exc
        finally:
            self._started.set()

    def cancel(self) -> None:
        loop, main = self._loop, self._main
        if loop is not None and main is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(main.cancel)
            except RuntimeError:  # the loop closed in between: the orchestration is over anyway
                pass

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the orchestration to end; False when it is still running after ``timeout``."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self) -> OrchestrationResult:
        self._thread.join()
        outcome = self._outcome
        if isinstance(outcome, asyncio.CancelledError):
            raise KeyboardInterrupt from None
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None
        return outcome
