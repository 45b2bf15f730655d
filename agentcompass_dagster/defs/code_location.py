"""The code location every client loads, and how its run workers and step containers load it again:
module ``agentcompass_dagster.definitions`` (attribute ``defs``), named ``agentcompass``, holding the
sweeps of AGENTCOMPASS_SWEEPS (sweep files separated by os.pathsep) or, unset, every sweep of
./resources, else of the resources shipped with the package. AGENTCOMPASS_RESULTS_DIR, when set, is the
results directory the sweeps of AGENTCOMPASS_SWEEPS run into in place of their output.results_dir
(`agentcompass run --results-dir`). Dagster hands a code location its inputs through the working
directory and the environment, not arguments; the CLI sets both for the processes it starts, and step
containers get them in their env_vars."""

from __future__ import annotations

import json
import os
from pathlib import Path

LOCATION_MODULE = "agentcompass_dagster.definitions"
LOCATION_NAME = "agentcompass"
SWEEPS_ENV = "AGENTCOMPASS_SWEEPS"
RESULTS_DIR_ENV = "AGENTCOMPASS_RESULTS_DIR"


def sweep_files_from_env() -> list[Path] | None:
    value = os.environ.get(SWEEPS_ENV)
    return [Path(part) for part in value.split(os.pathsep) if part] if value else None


def results_dir_from_env() -> Path | None:
    value = os.environ.get(RESULTS_DIR_ENV)
    return Path(value) if value else None


def location_env() -> list[str]:
    """KEY=VALUE entries a step container needs to load the same location."""
    return [f"{name}={os.environ[name]}" for name in (SWEEPS_ENV, RESULTS_DIR_ENV) if os.environ.get(name)]


def set_sweep_files(paths: list[Path], results_dir: Path | None = None) -> None:
    """Point the location (loaded here and in every process started from here) at these sweeps, run
    into ``results_dir`` when given, else into the results directories they declare."""
    os.environ[SWEEPS_ENV] = os.pathsep.join(str(Path(p).resolve()) for p in paths)
    if results_dir is None:
        os.environ.pop(RESULTS_DIR_ENV, None)
    else:
        os.environ[RESULTS_DIR_ENV] = str(Path(results_dir).resolve())


def write_workspace(home: Path) -> Path:
    """A workspace file holding this location (for `agentcompass ui SWEEP...` and daemons)."""
    from agentcompass_dagster.runtime.store.atomic import atomic_write_config

    entry = {
        "python_module": {
            "module_name": LOCATION_MODULE,
            "attribute": "defs",
            "location_name": LOCATION_NAME,
            "working_directory": os.getcwd(),
        }
    }
    path = home / "agentcompass-workspace.yaml"
    atomic_write_config(path, json.dumps({"load_from": [entry]}, indent=2) + "\n")
    return path
