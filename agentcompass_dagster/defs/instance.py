"""The project's Dagster instance under DAGSTER_HOME (default ./.dagster), made on first use.

The generated dagster.yaml turns telemetry off, queues runs for the daemon, launches every run in a
run worker process (defs/run_launcher.py) that Dagster's run monitoring watches, and keeps every event log
in one SQLite database (per-run databases cost a file per run and make partition queries slow), or, when
AGENTCOMPASS_DAGSTER_PG_URL names a PostgreSQL database (a team sharing one instance), keeps runs,
events and schedules there; the URL stays in the environment, never in the file. A dagster.yaml that
exists is never rewritten. First use is safe when several processes start at once: one of them creates
the storage while the others wait.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from urllib.parse import urlsplit

from agentcompass_dagster.contracts.errors import UserError
from agentcompass_dagster.runtime.store.atomic import atomic_write_config

log = logging.getLogger(__name__)

DEFAULT_HOME = Path(".dagster")
PG_URL_ENV = "AGENTCOMPASS_DAGSTER_PG_URL"
PG_SCHEME = "postgresql+psycopg2"
INIT_LOCK = ".agentcompass-init.lock"
INITIALIZED = ".agentcompass-initialized"
EVENT_BATCH_ENV = "DAGSTER_EVENT_BATCH_SIZE"
EVENT_BATCH_SIZE = "10000"

HEADER = """\
# Written by agentcompass on first use; edit freely (it is not overwritten).
telemetry:
  enabled: false
# Runs launched from the UI, by schedules and sensors wait in a queue for the daemon (`agentcompass ui`
# runs one); a queued run starts only when its sweep's pool has a free slot (max_concurrent_runs).
run_coordinator:
  module: dagster
  class: QueuedRunCoordinator
# Every run (from `agentcompass run`, the UI, schedules, sensors, backfills) in a run worker process of
# its own, without a code server (agentcompass_dagster/defs/run_launcher.py).
run_launcher:
  module: agentcompass_dagster.defs.run_launcher
  class: RunWorkerLauncher
# The daemon fails a run whose worker died and frees the pool slots of runs that ended.
run_monitoring:
  enabled: true
  poll_interval_seconds: 10
  free_slots_after_run_end_seconds: 30
concurrency:
  pools:
    op_granularity_run_buffer: 0
"""
SQLITE_YAML = (
    HEADER
    + """\
# Dagster's consolidated SQLite event log with pooled connections (agentcompass_dagster/defs/storage.py).
event_log_storage:
  module: agentcompass_dagster.defs.storage
  class: PooledSqliteEventLogStorage
  config:
    base_dir: {history}
"""
)
POSTGRES_YAML = (
    HEADER
    + """\
# Runs, events and schedules in the PostgreSQL database named by ${env} (a {scheme}:// URL).
run_storage:
  module: dagster_postgres.run_storage
  class: PostgresRunStorage
  config:
    postgres_url:
      env: {env}
# dagster-postgres's event log with pooled connections (agentcompass_dagster/defs/postgres_storage.py).
event_log_storage:
  module: agentcompass_dagster.defs.postgres_storage
  class: PooledPostgresEventLogStorage
  config:
    postgres_url:
      env: {env}
schedule_storage:
  module: dagster_postgres.schedule_storage
  class: PostgresScheduleStorage
  config:
    postgres_url:
      env: {env}
"""
)


def postgres_url() -> str | None:
    """The PostgreSQL URL of AGENTCOMPASS_DAGSTER_PG_URL, checked; None when unset."""
    url = os.environ.get(PG_URL_ENV)
    if not url:
        return None
    parts = urlsplit(url)
    shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    if parts.scheme != PG_SCHEME:
        raise UserError(
            f"{PG_URL_ENV}={shown!r}: use a {PG_SCHEME}:// URL (dagster-postgres with SQLAlchemy 2 "
            f"needs the driver named), e.g. {PG_SCHEME}://user:password@host:5432/dagster"
        )
    try:
        import dagster_postgres  # noqa: F401
    except ImportError:
        raise UserError(
            f"{PG_URL_ENV}={shown!r}: dagster-postgres is not installed; pip install -e '.[postgres]'"
        ) from None
    return url


def dagster_home(home: Path | None = None) -> Path:
    """Point this process (and those it starts) at DAGSTER_HOME, without creating anything yet, with
    Dagster's batched event writes on: a new run's planned events then reach the storage as one batch
    (defs/dagster_internals.py BatchedAssetEvents)."""
    chosen = (home or Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME)).resolve()
    os.environ["DAGSTER_HOME"] = str(chosen)
    os.environ.setdefault(EVENT_BATCH_ENV, EVENT_BATCH_SIZE)
    return chosen


def ensure_dagster_home(home: Path | None = None) -> Path:
    """Create DAGSTER_HOME, its dagster.yaml and its storage if needed, and point this process at it."""
    chosen = dagster_home(home)
    chosen.mkdir(parents=True, exist_ok=True)
    url = postgres_url()
    if (chosen / INITIALIZED).exists():
        _warn_if_unused(chosen, url)
        return chosen
    fd = os.open(chosen / INIT_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not (chosen / INITIALIZED).exists():
            config = chosen / "dagster.yaml"
            if not config.exists():
                atomic_write_config(config, generated_config(chosen))
            import dagster as dg

            # Creating the storage (tables, migrations) once, under the lock: two processes doing it
            # at once leave SQLite with two alembic heads, and every later opening fails.
            with dg.DagsterInstance.from_config(str(chosen)):
                pass
            atomic_write_config(chosen / INITIALIZED, "")
    finally:
        os.close(fd)
    return chosen


def generated_config(home: Path) -> str:
    """The dagster.yaml written into a new DAGSTER_HOME: PostgreSQL when AGENTCOMPASS_DAGSTER_PG_URL is set."""
    if postgres_url():
        return POSTGRES_YAML.format(env=PG_URL_ENV, scheme=PG_SCHEME)
    return SQLITE_YAML.format(history=home / "history")


def _warn_if_unused(home: Path, url: str | None) -> None:
    if url and "dagster_postgres" not in (home / "dagster.yaml").read_text():
        log.warning("%s is set but %s/dagster.yaml (kept as written) does not use PostgreSQL", PG_URL_ENV, home)
