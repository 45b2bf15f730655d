"""The command, ``agentcompass``: its argument parser (parser.py), its subcommands (main.py) and the live
progress it prints (progress.py). The top of the house: it may import every other room; none imports it."""
