"""The project's code location where Dagster projects keep it, at the repository's root: `dagster dev -f
definitions.py` (or `dagster dev`, through workspace.yaml) loads the location `agentcompass run` and
`agentcompass ui` load. Run it with the instance `agentcompass run` writes to, or the UI shows none of
its runs: ``DAGSTER_HOME=$PWD/.dagster .venv/bin/dagster dev -f definitions.py``."""

from agentcompass_dagster.definitions import defs

__all__ = ["defs"]
