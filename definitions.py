"""Dagster entry point (workspace.yaml loads this file): the sweeps declared in resources/."""

from pathlib import Path

from agentcompass_dagster.defs.definitions import build_definitions

defs = build_definitions(Path(__file__).resolve().parent / "resources")
