"""Acme's agentcompass plugins, each registered by an entry point of this package (pyproject.toml) and
each written from the docstrings of agentcompass_dagster.contracts alone, in at most 40 lines: the
acme-arith benchmark, the acme-oneshot harness and the acme-local environment.

acme-local implements what EnvironmentSession makes abstract and what the built-in benchmarks and
harnesses use (workdir, scratch, commands_dir, exec with a timeout, files relative to the workdir), and
leaves out what 40 lines do not hold: the verifier's own HOME, TMPDIR and PATH (Caller.verifier), killing
a command whose attempt is cancelled, recording labelled commands, the duration of a command."""
