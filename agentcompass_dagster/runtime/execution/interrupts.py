"""Interrupts counted where they arrive and acted on where the code checks for them."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupts:
    """SIGINT and SIGTERM counted, for the waits to check between their steps. Not raised as
    KeyboardInterrupt where they arrive: raised at whatever bytecode runs then, one lands now and then in
    a __del__ or weakref callback (SQLAlchemy's, while the instance is polled), where Python prints it and
    drops it, and the run would go on as if no Ctrl-C had been pressed."""

    def __init__(self) -> None:
        self.count = 0

    def _record(self, signum: int, frame: object) -> None:
        self.count += 1

    @contextmanager
    def counted(self) -> Iterator[Interrupts]:
        """Count the interrupts (main thread only: signal handlers live there) until the block ends."""
        previous = {sig: signal.signal(sig, self._record) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
