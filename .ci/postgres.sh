#!/usr/bin/env bash
# Start a PostgreSQL server for the tests that run Dagster on Postgres: a cluster made with initdb in a
# directory of its own, listening on 127.0.0.1 only. Source it: it exports AGENTCOMPASS_TEST_PG_URL. It
# never fails CI: without a server those tests are skipped with the reason shown.
set -uo pipefail
PGSTATE=${AGENTCOMPASS_PG_STATE:-/tmp/agentcompass-pg}
PGPORT=${AGENTCOMPASS_PG_PORT:-55432}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
as_pg=""
[ "$(id -u)" -eq 0 ] && as_pg="runuser -u postgres --"   # the server refuses to run as root

if [ -z "$PGBIN" ]; then
  echo "postgres: no server installed (apt-get install postgresql); Postgres tests will be skipped" >&2
  return 0 2>/dev/null || exit 0
fi
# Stops the server this script started (none when one answered already): .ci/run calls it on exit.
stop_postgres() {
  [ -n "${STARTED_PG:-}" ] || return 0
  $as_pg "$PGBIN/pg_ctl" -D "$PGSTATE/data" -m fast -w stop >/dev/null 2>&1 || true
}
if ! $as_pg "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT"; then
  STARTED_PG=1
  rm -rf "$PGSTATE"
  mkdir -p "$PGSTATE"
  [ -n "$as_pg" ] && chown postgres "$PGSTATE"
  $as_pg "$PGBIN/initdb" -D "$PGSTATE/data" -U postgres -A trust >"$PGSTATE/initdb.log" 2>&1 \
    && $as_pg "$PGBIN/pg_ctl" -D "$PGSTATE/data" -l "$PGSTATE/server.log" -w \
         -o "-p $PGPORT -c listen_addresses=127.0.0.1 -k $PGSTATE -c max_connections=200 -c fsync=off" start >/dev/null
fi
if $as_pg "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT"; then
  export AGENTCOMPASS_TEST_PG_URL="postgresql+psycopg2://postgres@127.0.0.1:$PGPORT/postgres"
else
  echo "postgres: the server did not start (see $PGSTATE); Postgres tests will be skipped" >&2
fi
