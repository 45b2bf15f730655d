"""The model calls of one attempt that have not returned, so that once the attempt is cut (its timeout, or
a limit) the runtime can tell whether the cut found a call waiting on an endpoint that never answered:
that is the endpoint's failure, an infrastructure error run again on reuse, not the agent's time.

A call that returns or raises leaves the record; a cancelled one (the cut, even when the cancellation
reaches it after the runtime looks, as from mini-swe-agent's worker thread) stays on it as it was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

from agentcompass_dagster.contracts.model import CALL_WATCH, CallWatch, Model


class CallsInFlight:
    def __init__(self) -> None:
        self._open: list[tuple[CallWatch, Model]] = []

    @contextmanager
    def watching(self, model: Model) -> Iterator[None]:
        """Around one call of ``model``, in the task that makes it (its transport marks the watch)."""
        watch = CallWatch()
        self._open.append((watch, model))
        token = CALL_WATCH.set(watch)
        cancelled = False
        try:
            yield
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            CALL_WATCH.reset(token)
            if not cancelled:
                self._open = [entry for entry in self._open if entry[0] is not watch]

    async def silence(self) -> str | None:
        """After a cut: why it is the endpoint's failure, when a call it left had no response and the
        call's model says its endpoint does not answer (``Model.unresponsive``); else None."""
        now = time.monotonic()
        waiting = [(model, now - watch.started) for watch, model in self._open if not watch.answered]
        if not waiting:
            return None
        model, waited = waiting[0]
        return await model.unresponsive(waited)
