"""Runs of a sweep's job created in the instance the way the UI or the daemon creates them: with the
job's snapshot and execution plan, the sweep's tags, a code origin that any run worker can load again
(module agentcompass_dagster.definitions) and the origin of the ``agentcompass`` code location, so the UI
finds the job and Re-execute works."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import dagster as dg

from agentcompass_dagster.defs.code_location import LOCATION_MODULE, LOCATION_NAME
from agentcompass_dagster.defs.dagster_internals import (
    SINGLETON_REPOSITORY_NAME,
    InProcessCodeLocationOrigin,
    LoadableTargetOrigin,
    ModuleCodePointer,
    ReconstructableRepository,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
    get_python_environment_entry_point,
)
from agentcompass_dagster.defs.run_owners import record_owner
from agentcompass_dagster.defs.sweep import SweepBenchmark
from agentcompass_dagster.runtime.store.processes import ProcessId

# The run's own log goes to the instance; the console of a run worker only says what went wrong.
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


class RunFactory:
    def __init__(self, instance: dg.DagsterInstance, defs: dg.Definitions) -> None:
        self.instance = instance
        self.repository = defs.get_repository_def()
        working_directory = os.getcwd()
        target = LoadableTargetOrigin(
            executable_path=sys.executable,
            module_name=LOCATION_MODULE,
            attribute="defs",
            working_directory=working_directory,
        )
        location = InProcessCodeLocationOrigin(target, location_name=LOCATION_NAME)
        self.repository_origin = RemoteRepositoryOrigin(location, SINGLETON_REPOSITORY_NAME)
        # Run workers and step containers start `python -m dagster` of this environment.
        self.reconstructable = ReconstructableRepository(
            ModuleCodePointer(LOCATION_MODULE, "defs", working_directory),
            executable_path=sys.executable,
            entry_point=get_python_environment_entry_point(sys.executable),
        )

    def create(
        self, sweep_benchmark: SweepBenchmark, tags: Mapping[str, str], asset_selection: set[dg.AssetKey] | None = None
    ) -> dg.DagsterRun:
        job = self.repository.get_job(sweep_benchmark.job_name)
        run = self.instance.create_run_for_job(
            job_def=job,
            run_config=QUIET,
            tags={**job.run_tags, **tags},
            asset_selection=asset_selection,
            remote_job_origin=RemoteJobOrigin(self.repository_origin, sweep_benchmark.job_name),
            job_code_origin=self.reconstructable.get_reconstructable_job(sweep_benchmark.job_name).get_python_origin(),
        )
        # Until it is launched, this process owns the run: if it dies first, the run is reaped.
        record_owner(self.instance, run.run_id, "launcher", ProcessId.this())
        return run
