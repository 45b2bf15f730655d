"""A sweep's budget (``budget: {max_cost_usd, max_tokens}``), across all of its runs, models and workers.

One ledger per sweep, ``<results_dir>/<sweep>/budget.jsonl``, that every process running the sweep
appends to under an exclusive ``flock``: a ``reserve`` line before a model call, a ``settle`` line with
what the call spent after it. A call is admitted only while what was spent, plus the calls in flight each
estimated at the largest call seen so far, stays below the budget; otherwise it waits for them to settle
(or, with the budget spent, is refused). With every call costing at most the largest seen, the total
can pass the budget by less than one call. Before any call has settled the estimate is unknown, so the
first call of a sweep goes alone. A reservation whose process is gone (killed mid-call) no longer counts:
the ledger keeps the process's identity (host, pid, start time) with it.

Each process reads the ledger incrementally (it keeps its offset and totals), so a check costs the
lines appended since its last one, not the whole ledger. Deleting the file resets what was spent.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.runtime.store.atomic import append_to, fsync_dir
from agentcompass_dagster.runtime.store.layout import BUDGET_LEDGER, sweep_root
from agentcompass_dagster.runtime.store.processes import ProcessId
from agentcompass_dagster.contracts.records import BudgetConfig, StoredRecord, SweepBudget, Usage, utcnow
from agentcompass_dagster.runtime.store.outcomes import BudgetStatus

log = logging.getLogger(__name__)

# How often a call waiting for calls in flight to settle looks at the ledger again.
WAIT_POLL_S = 0.05


class BudgetExhausted(Exception):
    """The sweep's budget is spent: the attempt stops without a result (not a failure of the agent, not
    an error to re-run at once); its task runs when the budget is raised."""

    def __init__(self, status: BudgetStatus) -> None:
        super().__init__(f"budget exhausted: {status.message}")
        self.status = status


class LedgerRecord(StoredRecord):
    """One line of the ledger. ``reserve``: a call about to be sent, by ``worker``; ``settle``: that call
    ended, having spent ``cost_usd`` (None: unknown, the model has no price) and ``tokens`` (input +
    output), for ``run`` (``<benchmark>/<model>/<run_id>``: the run directory under the sweep's, for
    whoever adds up cost per run)."""

    kind: Literal["reserve", "settle"]
    call: str
    worker: str | None = None
    run: str | None = None
    cost_usd: float | None = 0.0
    tokens: int = 0
    at: str = Field(default_factory=utcnow)


def sweep_budget(request: EvalRequest, run_id: str | None = None) -> SweepBudget | None:
    """The request's budget; ``run_id``: the run directory whose calls it is to charge."""
    if request.budget is None:
        return None
    return SweepBudget(
        limits=request.budget,
        ledger=sweep_root(request.output) / BUDGET_LEDGER,
        run=f"{request.name}/{run_id}" if run_id else None,
    )


class Ledger:
    """This process's view of one ledger file; shared by its threads (``ledger()``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._calls = itertools.count(1)
        self._reset(None)

    def _reset(self, inode: int | None) -> None:
        self._inode = inode
        self._offset = 0
        self._spent_usd = 0.0
        self._spent_tokens = 0
        self._cost_complete = True
        self._largest_usd: float | None = None
        self._largest_tokens: int | None = None
        self._open: dict[str, str] = {}

    @contextmanager
    def _locked(self) -> Iterator[int]:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            created = not self.path.exists()
            # O_NOFOLLOW: a link put in place of the ledger is refused, never written through.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                if created:
                    fsync_dir(self.path.parent)
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._catch_up(fd)
                yield fd
            finally:
                os.close(fd)

    def _catch_up(self, fd: int) -> None:
        """Apply the lines appended since this process last read; a replaced or shortened file (the
        ledger deleted to reset the budget) is read again from its start."""
        stat = os.fstat(fd)
        if stat.st_ino != self._inode or stat.st_size < self._offset:
            self._reset(stat.st_ino)
        data = os.pread(fd, stat.st_size - self._offset, self._offset)
        # A torn last line (its writer died mid-write) is not a record; the next append cuts it.
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            try:
                self._apply(LedgerRecord.model_validate_json(line))
            except ValidationError:
                log.warning("%s: a line that is not a ledger record was left out: %r", self.path, line[:200])
        self._offset += end

    def _apply(self, record: LedgerRecord) -> None:
        if record.kind == "reserve":
            self._open[record.call] = record.worker or ""
            return
        self._open.pop(record.call, None)
        self._spent_tokens += record.tokens
        self._largest_tokens = max(self._largest_tokens or 0, record.tokens)
        if record.cost_usd is None:
            self._cost_complete = False
        else:
            self._spent_usd += record.cost_usd
        self._largest_usd = max(self._largest_usd or 0.0, record.cost_usd or 0.0)

    def _append(self, fd: int, record: LedgerRecord) -> None:
        # A reservation has no spend yet, a settlement no worker: each line carries only its own fields.
        unused = {"cost_usd", "tokens", "run"} if record.kind == "reserve" else {"worker"}
        append_to(fd, record.model_dump_json(exclude=unused).encode() + b"\n")
        self._offset = os.fstat(fd).st_size
        self._apply(record)

    def _status(self, limits: BudgetConfig) -> BudgetStatus:
        return BudgetStatus(
            max_cost_usd=limits.max_cost_usd,
            max_tokens=limits.max_tokens,
            spent_usd=self._spent_usd,
            spent_tokens=self._spent_tokens,
            cost_complete=self._cost_complete,
        )

    def status(self, limits: BudgetConfig) -> BudgetStatus:
        with self._locked():
            return self._status(limits)

    def reserve(self, limits: BudgetConfig) -> str | None:
        """Reserve one model call: its id, or None while calls in flight could spend what is left (wait
        and ask again); raises BudgetExhausted when the budget is spent."""
        with self._locked() as fd:
            status = self._status(limits)
            if status.exhausted:
                raise BudgetExhausted(status)
            in_flight = sum(1 for worker in self._open.values() if _alive(worker))
            if in_flight and not (
                _room(limits.max_cost_usd, self._spent_usd, self._largest_usd, in_flight)
                and _room(limits.max_tokens, self._spent_tokens, self._largest_tokens, in_flight)
            ):
                return None
            worker = str(ProcessId.this())
            call = f"{worker}#{next(self._calls)}"
            self._append(fd, LedgerRecord(kind="reserve", call=call, worker=worker))
            return call

    def settle(self, call: str, usage: Usage | None, run: str | None) -> None:
        """The call ended: what it spent (None: it failed before the endpoint answered, nothing known)."""
        spent = usage or Usage()
        with self._locked() as fd:
            self._append(
                fd,
                LedgerRecord(
                    kind="settle",
                    call=call,
                    run=run,
                    cost_usd=spent.cost_usd,
                    tokens=spent.input_tokens + spent.output_tokens,
                ),
            )


def _room(allowance: float | None, spent: float, largest: float | None, in_flight: int) -> bool:
    """Whether the calls in flight, each as large as the largest so far, leave some of the allowance;
    with no call settled yet their size is unknown, so they may take all of it."""
    if allowance is None:
        return True
    return largest is not None and spent + in_flight * largest < allowance


def _alive(worker: str) -> bool:
    identity = ProcessId.parse(worker)
    return identity is not None and identity.alive()


_LEDGERS: dict[Path, Ledger] = {}
_LEDGERS_LOCK = threading.Lock()


def ledger(path: Path) -> Ledger:
    """The one Ledger of this process for a file: its threads share the offset, totals and call ids."""
    key = Path(os.path.abspath(path))
    with _LEDGERS_LOCK:
        return _LEDGERS.setdefault(key, Ledger(key))


async def reserve_call(budget: SweepBudget) -> str:
    """Wait until the budget admits one model call and reserve it; raises BudgetExhausted."""
    book = ledger(budget.ledger)
    while (call := await asyncio.to_thread(book.reserve, budget.limits)) is None:
        await asyncio.sleep(WAIT_POLL_S)
    return call


def settle_call(budget: SweepBudget, call: str, usage: Usage | None) -> None:
    """Record what a reserved call spent. Synchronous (a short locked append): it runs in a ``finally``
    that cancellation reaches too, where an await could be cut short and leave the reservation open."""
    ledger(budget.ledger).settle(call, usage, budget.run)


def budget_status(budget: SweepBudget) -> BudgetStatus:
    return ledger(budget.ledger).status(budget.limits)


def budget_figures(budget: SweepBudget) -> dict[str, str | float | int]:
    """What the budget allows and what every run of the sweep has spent, as the metrics asset shows it."""
    status = budget_status(budget)
    limits = {"budget max usd": status.max_cost_usd, "budget max tokens": status.max_tokens}
    return {
        "budget": status.message,
        "budget spent usd": status.spent_usd,
        "budget spent tokens": status.spent_tokens,
        **{name: value for name, value in limits.items() if value is not None},
        "budget ledger": str(budget.ledger.resolve()),
    }


def check_budget(budget: SweepBudget) -> None:
    """Raise BudgetExhausted when the budget is spent."""
    status = budget_status(budget)
    if status.exhausted:
        raise BudgetExhausted(status)
