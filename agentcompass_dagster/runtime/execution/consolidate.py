"""One complete run for a benchmark x model after several runs wrote into it at once.

A run reuses the newest earlier run (hard links), so after runs one at a time the newest run directory
holds every finished detail. Runs that overlap in time (a sweep split into concurrent runs, a schedule
tick beside a CLI run) each reuse the same earlier run and each finish only their own share. The newest
of them then lacks the others' details; consolidation writes a new run directory that reuses the newest
and merges in every finished detail it lacks, then finalises it (summary, metrics, analysis), so the
newest run is complete again. It runs no task.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from agentcompass_dagster.contracts.request import EvalRequest
from agentcompass_dagster.contracts.analyzer import Analyzer
from agentcompass_dagster.runtime.execution.plugins import Plugins
from agentcompass_dagster.runtime.execution.finalize import finalize_request
from agentcompass_dagster.runtime.results.scores import TaskScores
from agentcompass_dagster.runtime.store.layout import DETAILS, ERROR_PREFIX
from agentcompass_dagster.runtime.store.run_dir import RunDir
from agentcompass_dagster.runtime.store.run_records import ReuseSource
from agentcompass_dagster.runtime.store.run_store import RunStore
from agentcompass_dagster.contracts.records import TaskSpec

# A run whose details directory changed this long before the newest run started may still hold
# details the newest lacks (clocks of hosts sharing the results directory differ a little).
CLOCK_SLACK_S = 5.0


def _normal_details(run: ReuseSource) -> set[str]:
    try:
        names = os.listdir(Path(run.path) / DETAILS)
    except FileNotFoundError:
        return set()
    return {name for name in names if name.endswith(".json") and not name.startswith((ERROR_PREFIX, "."))}


def _changed_since(run: ReuseSource, started_at: str) -> bool:
    try:
        changed = os.stat(Path(run.path) / DETAILS).st_mtime
    except FileNotFoundError:
        return False
    return changed >= datetime.fromisoformat(started_at).timestamp() - CLOCK_SLACK_S


def runs_to_merge(store: RunStore, root: Path) -> tuple[ReuseSource | None, list[ReuseSource]]:
    """The newest run and, newest first, the other runs holding a finished detail it lacks. Only runs
    whose details changed after the newest started can: the newest linked everything finished before."""
    runs = store.runs_newest_first(root)
    if not runs:
        return None, []
    newest, *older = runs
    have = _normal_details(newest)
    extra = []
    for run in older:
        if _changed_since(run, newest.started_at) and _normal_details(run) - have:
            extra.append(run)
    return newest, extra


def consolidate(
    request: EvalRequest,
    plugins: Plugins,
    analyzers: list[Analyzer],
    tasks: list[TaskSpec],
    store: RunStore,
    root: Path,
) -> RunDir | None:
    """A new, finalised run holding every finished detail of the runs below ``root``, or None when the
    newest run already holds them all. ``request`` runs nothing (its run_only is empty)."""
    newest, extra = runs_to_merge(store, root)
    if newest is None or not extra:
        return None
    run_dir = store.reserve(root, None)
    try:
        run_dir.record.write(request, [t.id for t in tasks], run_dir.paths)
        run_dir.record.write_params(request)
        scores = TaskScores(tasks)
        merged: dict[str, list[str]] = {}
        for source in (newest, *extra):
            before = set(scores.reused_positions())
            run_dir.link_reused_details(source, scores)
            merged[source.run_id] = sorted(tasks[p].id for p in set(scores.reused_positions()) - before)
        run_dir.record.set_reused_from(newest, merged[newest.run_id])
        run_dir.record.set_merged_from(extra, merged)
        run_dir.log(
            f"consolidated {len(scores)} details of {len(extra) + 1} runs: {newest.run_id} and "
            f"{', '.join(source.run_id for source in extra)}"
        )
        finalize_request(request, plugins, analyzers, run_dir, scores, "completed")
    except BaseException as exc:
        run_dir.record.write_terminal_status("failed", str(exc))
        raise
    finally:
        run_dir.close()
    return run_dir
