"""The project's Dagster instance: SQLite under DAGSTER_HOME (default ./.dagster), made on first use with
a dagster.yaml that turns telemetry off and keeps all event logs in one consolidated SQLite database
(per-run databases cost a file per run and make partition queries slow)."""

import os
from pathlib import Path

DEFAULT_HOME = Path(".dagster")

DAGSTER_YAML = """\
# Written by agentcompass on first use; edit freely (it is not overwritten).
telemetry:
  enabled: false
event_log_storage:
  module: dagster._core.storage.event_log
  class: ConsolidatedSqliteEventLogStorage
  config:
    base_dir: {history}
"""


def ensure_dagster_home(home: Path | None = None) -> Path:
    """Create DAGSTER_HOME and its dagster.yaml if needed, and point this process at it."""
    chosen = home or Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME)
    chosen = chosen.resolve()
    chosen.mkdir(parents=True, exist_ok=True)
    config = chosen / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML.format(history=chosen / "history"))
    os.environ["DAGSTER_HOME"] = str(chosen)
    # Planned-run events then carry a compact partition subset instead of one entry per partition.
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    return chosen
