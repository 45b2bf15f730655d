"""The command, ``agentcompass``: its parser and subcommands (main.py) and the live progress it prints
(progress.py). The top of the house: it may import every other room; none imports it."""
