"""The code location of agentcompass_dagster, ``agentcompass``: the one entry point that `dagster dev`
(workspace.yaml), `agentcompass run` and `agentcompass ui` load, and their run workers and step
containers load again. Which sweeps it holds comes from the environment, the way Dagster hands a code
location its inputs: AGENTCOMPASS_SWEEPS when set, else those of ./resources, else those shipped with
the package (defs/code_location.py)."""

from agentcompass_dagster.defs.location import location_definitions

defs = location_definitions()
