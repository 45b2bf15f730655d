"""Runs made again from what a run recorded: the request that resumes an interrupted run (resume.py;
each attempt then picks up from its activity log, durable/resume.py), a fork onto another model from a
checkpoint (fork.py, R-FORK) and a replay of the recorded tool calls (replay.py, R-REPLAY). Above the
runtime's execution, which they drive; may import it and everything below it, never the Dagster layer,
the command or the reporting."""
