"""Harbor / Terminal-Bench 2 tasks, run unmodified: task.toml (task_config.py), a directory of tasks
(loader.py), rewards (rewards.py) and the benchmark (benchmark.py)."""

from agentcompass_dagster.plugins.benchmarks.harbor.benchmark import HarborTasksBenchmark

__all__ = ["HarborTasksBenchmark"]
