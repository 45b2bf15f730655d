"""Partitions of a benchmark's attempts: model x task, with task ids turned into safe, stable keys.

Dagster partition keys may not contain "...", "|" (the multi-partition delimiter), "," or control
characters, and long keys make the UI unusable. Ids that are already safe are their own key; any other id
becomes a readable slug plus a hash of the whole id, with "~" between them, a character no safe id has,
so the two kinds never collide.
"""

import hashlib
import re
from dataclasses import dataclass

import dagster as dg

# Run tags of a partition range, as Dagster's backfills and the UI write them.
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
SAFE_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MAX_SLUG = 40


def partition_key(identifier: str) -> str:
    """A stable, collision-free Dagster partition key for a task (or model) id."""
    if SAFE_KEY.match(identifier) and "..." not in identifier:
        return identifier
    slug = re.sub(r"[^A-Za-z0-9_\-]+", "_", identifier).strip("_")[:MAX_SLUG] or "id"
    return f"{slug}~{hashlib.sha256(identifier.encode()).hexdigest()[:12]}"


def dagster_name(*parts: str) -> str:
    """A Dagster name (jobs, schedules, resources, partition sets) for these parts: [A-Za-z0-9_]."""
    text = "__".join(re.sub(r"[^A-Za-z0-9_]", "_", part) for part in parts)
    return text if text[:1].isalpha() else f"x_{text}"


def asset_key(sweep: str, benchmark: str, kind: str) -> dg.AssetKey:
    """<sweep>/<benchmark>/<kind>: two sweeps may evaluate the same benchmark. Dagster derives op input
    names from asset keys, mapping only "-" and "." to "_", so any other character a name may hold (the
    ":" of a benchmark named by its class path) is mapped here."""
    return dg.AssetKey([re.sub(r"[^A-Za-z0-9_.\-]", "_", part) for part in (sweep, benchmark, kind)])


def tasks_partitions_name(sweep: str, benchmark: str) -> str:
    return dagster_name("tasks", sweep, benchmark)


def attempts_partitions(sweep: str, benchmark: str, model_keys: list[str]) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition(
        {
            "model": dg.StaticPartitionsDefinition(model_keys),
            "task": dg.DynamicPartitionsDefinition(name=tasks_partitions_name(sweep, benchmark)),
        }
    )


def split_key(key: str) -> tuple[str, str]:
    """(model key, task key) of a multi-partition key string; dimensions are ordered by name."""
    model, _, task = key.partition("|")
    return model, task


@dataclass(frozen=True)
class KeyRange:
    """A rectangle of partitions: contiguous models x contiguous tasks, one Dagster run."""

    model_start: str
    model_end: str
    task_start: str
    task_end: str

    def tags(self) -> dict[str, str]:
        return {RANGE_START: f"{self.model_start}|{self.task_start}", RANGE_END: f"{self.model_end}|{self.task_end}"}


def missing_ranges(
    model_keys: list[str], task_keys: list[str], done: set[str], max_per_run: int | None = None
) -> list[KeyRange]:
    """The few runs that cover every (model, task) not in ``done`` (materialized or targeted by a run
    in flight), each of at most ``max_per_run`` such partitions.

    Per model, spans from a first to a last missing task (a finished or busy task inside a span is
    skipped by the run, not run again), cut so that no span holds more than ``max_per_run`` missing
    tasks; consecutive models with the same span share a run while the run stays within the bound.
    """
    limit = max_per_run or len(model_keys) * len(task_keys) or 1
    spans: list[tuple[int, int, int, int]] = []  # model index, first task, last task, missing count
    for m, model in enumerate(model_keys):
        missing = [i for i, task in enumerate(task_keys) if f"{model}|{task}" not in done]
        for start in range(0, len(missing), limit):
            chunk = missing[start : start + limit]
            spans.append((m, chunk[0], chunk[-1], len(chunk)))
    merged: list[tuple[int, int, int, int, int]] = []  # first model, last model, first, last, count
    for m, first, last, count in spans:
        if merged:
            m0, m1, first0, last0, c = merged[-1]
            if m1 == m - 1 and (first0, last0) == (first, last) and c + count <= limit:
                merged[-1] = (m0, m, first0, last0, c + count)
                continue
        merged.append((m, m, first, last, count))
    return [
        KeyRange(model_keys[m0], model_keys[m1], task_keys[first], task_keys[last]) for m0, m1, first, last, _ in merged
    ]


def range_keys(key_range: KeyRange, model_keys: list[str], task_keys: list[str]) -> set[str]:
    """Every multi-partition key inside a range (a rectangle of models x tasks in partition order)."""
    models = model_keys[model_keys.index(key_range.model_start) : model_keys.index(key_range.model_end) + 1]
    tasks = task_keys[task_keys.index(key_range.task_start) : task_keys.index(key_range.task_end) + 1]
    return {f"{model}|{task}" for model in models for task in tasks}
