"""The code location `agentcompass run` launches its runs from; see defs/code_location.py."""

from agentcompass_dagster.defs.definitions import location_definitions

defs = location_definitions()
