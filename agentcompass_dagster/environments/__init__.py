"""Execution environments: where a task's commands run (local, sandbox under bubblewrap, docker); the
contract is ``base.Environment`` and its ``base.EnvironmentSession``."""
