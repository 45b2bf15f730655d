"""The Dagster layer: a declarative mapping of the sweeps in resources/ onto Dagster, one module per
concern, as in Dagster's example projects: assets, asset_checks, jobs, schedules, sensors, resources
and partitions; sweep (a benchmark of a sweep: its names and what a process prepares once for it),
planning (which runs are due), coordination (no task evaluated by two runs at once), instance
(DAGSTER_HOME) and location (the Definitions of a set of sweeps). The launcher of the CLI lives apart,
in agentcompass_dagster.launcher. May import everything but the launcher and the command; the runtime
imports none of it."""
