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

SAFE_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MAX_SLUG = 40


def partition_key(identifier: str) -> str:
    """A stable, collision-free Dagster partition key for a task (or model) id."""
    if SAFE_KEY.match(identifier) and "..." not in identifier:
        return identifier
    slug = re.sub(r"[^A-Za-z0-9_\-]+", "_", identifier).strip("_")[:MAX_SLUG] or "id"
    return f"{slug}~{hashlib.sha256(identifier.encode()).hexdigest()[:12]}"


def identifier(*parts: str) -> str:
    """A Dagster name (jobs, schedules, resources, partition sets) for these parts: [A-Za-z0-9_]."""
    text = "__".join(re.sub(r"[^A-Za-z0-9_]", "_", part) for part in parts)
    return text if text[:1].isalpha() else f"x_{text}"


def tasks_partitions_name(sweep: str, benchmark: str) -> str:
    return identifier("tasks", sweep, benchmark)


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
        return {
            "dagster/asset_partition_range_start": f"{self.model_start}|{self.task_start}",
            "dagster/asset_partition_range_end": f"{self.model_end}|{self.task_end}",
        }


def missing_ranges(model_keys: list[str], task_keys: list[str], materialized: set[str]) -> list[KeyRange]:
    """The few runs that cover every (model, task) without a materialization.

    Per model, one span from its first to its last missing task (finished tasks inside a span are reused
    by the run, not run again); consecutive models with the same span share a run. Runs never overlap on
    a model, so no two of them write the same results root at once.
    """
    spans: list[tuple[str, int, int]] = []
    for model in model_keys:
        missing = [i for i, task in enumerate(task_keys) if f"{model}|{task}" not in materialized]
        if missing:
            spans.append((model, missing[0], missing[-1]))
    ranges: list[KeyRange] = []
    previous: tuple[int, int] | None = None
    for index, (model, first, last) in enumerate(spans):
        adjacent = index > 0 and model_keys.index(model) == model_keys.index(spans[index - 1][0]) + 1
        if ranges and adjacent and previous == (first, last):
            ranges[-1] = KeyRange(ranges[-1].model_start, model, task_keys[first], task_keys[last])
        else:
            ranges.append(KeyRange(model, model, task_keys[first], task_keys[last]))
        previous = (first, last)
    return ranges
