"""Execution environments: where a task's commands run (local subprocess; sandbox and docker later)."""
