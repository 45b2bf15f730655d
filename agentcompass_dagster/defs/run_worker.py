"""A run worker: ``python -m agentcompass_dagster.defs.run_worker ARGS`` executes one Dagster run, as
`dagster api execute_run ARGS` does (ARGS: Dagster's serialized ExecuteRunArgs), without what that
command keeps of every event (defs/dagster_internals.py execute_run)."""

import sys

from agentcompass_dagster.defs.dagster_internals import execute_run

if __name__ == "__main__":
    sys.exit(execute_run(sys.argv[1]))
