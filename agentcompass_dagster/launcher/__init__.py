"""How `agentcompass run` launches a sweep through Dagster and follows it: the launch (launch.py), the run
worker started ahead (workers.py), the runs it waits on (runs.py, follow.py) and the live progress it
prints (progress.py). Above the Dagster layer, which it drives; may import it and everything below it,
never the command."""
