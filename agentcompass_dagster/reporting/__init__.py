"""What runs come to, for people: the pandas API over the results directory (``results``: load_metrics,
load_task_results, load_comparisons, load_history), the HTML report (``report`` over ``report_data``, with
its ``diagnosis`` and ``plots``), the trajectory pages (``trajectory``, over ``trajectory_data``), the
runs' history (``history``) and `agentcompass show`'s overview of a run directory (``show``).

It reads what the runtime wrote (runtime/store, runtime/results) and may import the runtime, the durable
layer's records, the contracts and the analyzers; the command (cli/) and the Dagster layer (defs/)
import it, never the other way round."""
