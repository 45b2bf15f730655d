"""Running a request: the orchestrator, the task runner and its attempts, the execution plan, plugin
resolution, environment permits and the sweep's spending budget."""
