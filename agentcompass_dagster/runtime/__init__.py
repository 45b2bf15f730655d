"""The evaluation runtime. It imports nothing from Dagster, so the CLI and tests run it directly."""
