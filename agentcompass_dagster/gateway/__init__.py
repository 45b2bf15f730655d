"""The model gateway: agent CLIs inside a task's environment reach the framework's model layer through it."""
