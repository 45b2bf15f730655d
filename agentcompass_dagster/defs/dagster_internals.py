"""The one module that imports Dagster's private API (``dagster._``): what the public ``dagster`` package
does not export yet. Each import says why it is needed; when Dagster exports one, it moves to ``dg``."""

# ui model

# The type define_asset_job returns; dagster does not export it, and the job, the schedule and the sensor
# of a sweep are typed with it.
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

__all__ = ["UnresolvedAssetJobDefinition"]
