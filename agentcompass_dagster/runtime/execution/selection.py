"""A request's tasks: loaded from its benchmark, their ids checked, the declared selection applied
(R-PREP-1). A problem with what the user declared names the sweep file and the field."""

from __future__ import annotations

from typing import NamedTuple

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.benchmark import Benchmark
from agentcompass_dagster.contracts.errors import UserError, did_you_mean, field_error
from agentcompass_dagster.runtime.store.naming import task_id_problem
from agentcompass_dagster.contracts.records import NotLoaded, TaskSpec


def validate_task_ids(benchmark_id: str, tasks: list[TaskSpec]) -> None:
    """R-PREP-1: unique, well-formed ids; a bad one is a user-facing error naming it."""
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        problem = task_id_problem(task.id)
        if problem:
            raise UserError(f"benchmark {benchmark_id!r}: task id={task.id!r} (task #{index}) {problem}")
        if task.id in seen:
            raise UserError(f"benchmark {benchmark_id!r}: task id={task.id!r} is duplicated")
        seen.add(task.id)


class Selection(NamedTuple):
    """A request's selected tasks, in order, and the tasks its benchmark could not load (the run lists
    them; the others run)."""

    tasks: list[TaskSpec]
    not_loaded: list[NotLoaded]


def check_declared_tasks(request: EvalRequest, tasks: list[TaskSpec], not_loaded: list[NotLoaded]) -> None:
    """Every task id the request declares is one of the benchmark's (loaded or not); the first that is
    not is refused with the nearest id when one is close."""
    known = [task.id for task in tasks]
    ids = set(known) | {task.id for task in not_loaded}
    unknown = next((task_id for task_id in request.benchmark.tasks or [] if task_id not in ids), None)
    if unknown is None:
        return
    hint = did_you_mean(unknown, known)
    raise field_error(
        request.benchmark_field("tasks"), unknown, f"no such task in benchmark {request.benchmark.id!r}{hint}"
    )


def load_selected_tasks(request: EvalRequest, benchmark: Benchmark) -> Selection:
    """Load the benchmark's tasks, validate their ids and apply the declared selection; the tasks it
    could not load are left out (those the request declares, or all where it declares none)."""
    tasks = benchmark.load_tasks()
    failed = benchmark.not_loaded()
    validate_task_ids(request.benchmark.id, tasks)
    check_declared_tasks(request, tasks, failed)
    declared = set(request.benchmark.tasks) if request.benchmark.tasks is not None else None
    not_loaded = [task for task in failed if declared is None or task.id in declared]
    selected = benchmark.select_tasks(tasks)
    if not selected:
        reasons = "".join(f"; {task.id}: {task.reason}" for task in not_loaded[:3])
        raise field_error(request.benchmark_field("tasks"), request.benchmark.tasks, "selects no task" + reasons)
    return Selection(selected, not_loaded)
