"""What makes a long run durable (R-DUR): the activity log every model and tool call is written to before
the attempt goes on (activity.py), content-addressed checkpoints of the task's files (checkpoints.py,
file_tree.py), the durable session that records each command so that a crash loses none (session.py),
and how an attempt picks up from its log (resume.py: the harness calls it). The requests that resume,
fork and replay a run are in reruns/. May import the contracts, the run directory's store and the
built-in environments' host-directory probe; never the runtime's execution, the harnesses, the Dagster
layer or the command."""
