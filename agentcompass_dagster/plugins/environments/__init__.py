"""Execution environments: where a task's commands run (local, sandbox under bubblewrap, docker); the
contract is ``contracts.environment.Environment`` and its ``EnvironmentSession``. May import the
contracts and the run directory's store."""
