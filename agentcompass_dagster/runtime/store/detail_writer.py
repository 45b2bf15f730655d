"""One thread per run that makes finished tasks' details durable in batches (R-STORE-6).

It takes every detail waiting and hands them to ``RunDir.save_finished``: each is written to a temp file,
the temp files are fsynced (on ext4 the first fsync commits the others' data with it), renamed into
place without clobbering, and ``details/`` is fsynced once; only then is the whole batch reported to the
event loop, in one call. Compared with a thread per detail this takes the same fsyncs of the files but a
fraction of the directory fsyncs, wake-ups and GIL hand-offs: a third less CPU per task in a sweep of
no-op tasks. Normal details only: an error detail goes through ``save_detail`` directly.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentcompass_dagster.runtime.store.outcomes import TaskDetail

if TYPE_CHECKING:
    from agentcompass_dagster.runtime.store.run_dir import RunDir


@dataclass
class _Waiting:
    detail: TaskDetail
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Path | None]


def _settle(items: list[_Waiting], results: list[Path | None] | Exception) -> None:
    """On the event loop: a cancelled waiter (a timed-out orchestration) is left alone."""
    for index, item in enumerate(items):
        if item.future.done():
            continue
        if isinstance(results, Exception):
            item.future.set_exception(results)
        else:
            item.future.set_result(results[index])


class DetailWriter:
    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir
        # A thread and the queue it alone reads; made by the first submit, again after a close.
        self._queue: queue.SimpleQueue[_Waiting | None] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, detail: TaskDetail) -> asyncio.Future[Path | None]:
        """The detail's path once it is durable (None when a normal detail of the task was there)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Path | None] = loop.create_future()
        with self._lock:
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                self._thread = threading.Thread(
                    target=self._run, args=(self._queue,), daemon=True, name=f"details-{self.run_dir.run_id}"
                )
                self._thread.start()
            self._queue.put(_Waiting(detail, loop, future))
        return future

    def close(self) -> None:
        """Write what is waiting, then stop the thread."""
        with self._lock:
            thread, waiting = self._thread, self._queue
            self._thread = self._queue = None
            if waiting is not None:
                waiting.put(None)
        if thread is not None:
            thread.join()

    def _run(self, waiting: queue.SimpleQueue[_Waiting | None]) -> None:
        while True:
            first = waiting.get()
            if first is None:
                return
            batch, stop = [first], False
            while not stop:
                try:
                    item = waiting.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                else:
                    batch.append(item)
            self._write(batch)
            if stop:
                return

    def _write(self, batch: list[_Waiting]) -> None:
        results: list[Path | None] | Exception
        try:
            results = self.run_dir.save_finished([item.detail for item in batch])
            for item in batch:
                if item.detail.k > 1:
                    # The task's terminal detail is durable: its finished-attempt records are not needed (R-RETRY-4).
                    self.run_dir.finished.delete(item.detail.task_id, item.detail.k)
        except Exception as exc:  # every waiting task gets it, as a write of its own would have raised it
            results = exc
        by_loop: dict[asyncio.AbstractEventLoop, list[int]] = {}
        for index, item in enumerate(batch):
            by_loop.setdefault(item.loop, []).append(index)
        for loop, indexes in by_loop.items():
            mine = results if isinstance(results, Exception) else [results[i] for i in indexes]
            try:
                loop.call_soon_threadsafe(_settle, [batch[i] for i in indexes], mine)
            except RuntimeError:  # that loop is closed: nobody waits any more
                pass
