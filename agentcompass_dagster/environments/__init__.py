"""Execution environments: where a task's commands run (local, sandbox under bubblewrap, docker); the
contract is ``contracts.environment.Environment`` and its ``EnvironmentSession``."""
