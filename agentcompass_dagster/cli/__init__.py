"""The command, ``agentcompass``: its argument parser (parser.py) and its subcommands and what each runs
(main.py). The top of the house: it may import every other room; none imports it. Its live progress
board is the launcher's (launcher/progress.py)."""
