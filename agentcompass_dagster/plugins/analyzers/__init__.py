"""The analyzers that say what an agent did (R-ATT-5), one module each, registered in
``agentcompass_dagster.declarations.registry.analyzers``: repeated commands and no-progress streaks (``loops``),
tool errors and unusable model replies (``tool_errors``), token and cost outliers (``cost_outliers``),
where the time went (``time_split``), attempts that gave up (``gave_up``) and suspected reward hacking
(``reward_hacking``, which reads the final answer too). They read the trajectory in the step format of
``tool_agent`` and ``miniswe`` (``steps``); ``columns`` turns their results into columns of
task_results.parquet and ``overview`` into the figures on the Dagster metrics asset. May import the contracts
and the run directory's store."""
