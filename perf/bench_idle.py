"""What an idle deployment costs: a code location of --sweeps sweeps (copies of the shipped demo sweep
under distinct names, in a temp directory) served to a `dagster-daemon run` with nothing to do.

The daemon is started as `agentcompass ui` starts it (the generated DAGSTER_HOME, the workspace file
naming the location `agentcompass`, AGENTCOMPASS_SWEEPS pointing at the copies); it starts the code
server itself. After --warmup seconds (the sensors' first ticks register the sweeps' partitions) it is
watched for --seconds. Printed: the CPU seconds of the daemon's whole process tree (its session: the
daemon, its threads and the code server; the time of a child that ended in the window is counted in
its parent's) over the window's wall seconds, i.e. the cores used; the location's sensors and
schedules; the sensor ticks in the window; and how much the daemon's log grew.

    python perf/bench_idle.py [--sweeps 12] [--seconds 120] [--warmup 60] [--keep DIR]

Issue 39's goal: at most 0.05 core for 12 sweeps. Run it on an otherwise idle machine: it measures
the machine's only other work too (whatever the daemon waits for).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "resources" / "sweeps" / "demo.yaml"
GOAL_CORES = 0.05
# /proc/<pid>/stat fields after the command name: session, then utime, stime, cutime, cstime.
SESSION, TIMES = 3, slice(11, 15)


def write_sweeps(directory: Path, count: int) -> list[Path]:
    """``count`` copies of the shipped demo sweep, named idle01..., results under ``directory/results``."""
    shipped = yaml.safe_load(SHIPPED.read_text())
    paths = []
    for index in range(1, count + 1):
        sweep = {**shipped, "name": f"idle{index:02d}", "output": {"results_dir": str(directory / "results")}}
        path = directory / f"idle{index:02d}.yaml"
        path.write_text(yaml.safe_dump(sweep, sort_keys=False))
        paths.append(path)
    return paths


def session_cpu_seconds(session: int) -> float:
    """User+system CPU of every process of a session, with that of its children that ended and were waited for."""
    ticks = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # ended while we looked
        if int(fields[SESSION]) == session:
            ticks += sum(int(value) for value in fields[TIMES])
    return ticks / os.sysconf("SC_CLK_TCK")


def sensors_and_ticks(home: Path, since: float) -> dict[str, int]:
    """Sensor and schedule name -> its ticks since ``since`` (a timestamp), read from the instance."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        return {
            state.instigator_name: len(instance.get_ticks(state.instigator_origin_id, state.selector_id, after=since))
            for state in instance.all_instigator_state()
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=120.0, help="the idle window measured")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds before the window")
    parser.add_argument("--keep", type=Path, help="work in DIR and keep it (the daemon's log, the instance)")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-idle-"))
    work.mkdir(parents=True, exist_ok=True)
    from agentcompass_dagster.defs.code_location import set_sweep_files, write_workspace
    from agentcompass_dagster.defs.location import sweep_files_definitions
    from agentcompass_dagster.defs.instance import ensure_dagster_home
    from agentcompass_dagster.runtime.store.processes import stop_group

    sweeps = write_sweeps(work, args.sweeps)
    home = ensure_dagster_home(work / "dagster_home")
    os.chdir(work)  # the workspace names the working directory the location loads in
    set_sweep_files(sweeps)
    workspace = write_workspace(home)
    repository = sweep_files_definitions(sweeps, None).get_repository_def()
    log_path = work / "daemon.log"
    with log_path.open("wb") as log:
        daemon = subprocess.Popen(
            [str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w", str(workspace)],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        since = 0.0
        time.sleep(args.warmup)
        if daemon.poll() is not None:
            print(f"the daemon exited with {daemon.returncode}; see {log_path}", file=sys.stderr)
            return 1
        cpu, size, started, since = (
            session_cpu_seconds(daemon.pid),
            log_path.stat().st_size,
            time.monotonic(),
            time.time(),
        )
        time.sleep(args.seconds)
        cpu, size = session_cpu_seconds(daemon.pid) - cpu, log_path.stat().st_size - size
        wall = time.monotonic() - started
    finally:
        stop_group(daemon, ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)))
        ticks = sensors_and_ticks(home, since) if since else {}
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    cores = cpu / wall
    result = {
        "sweeps": args.sweeps,
        "sensors": len(repository.sensor_defs),
        "schedules": len(repository.schedule_defs),
        "window_s": round(wall, 1),
        "cpu_s": round(cpu, 2),
        "cores": round(cores, 4),
        "daemon_log_bytes": size,
        "daemon_log_bytes_per_min": round(size * 60 / wall),
        "ticks_in_window": ticks,
        "work_dir": str(work) if args.keep else None,
    }
    print(json.dumps(result, indent=2))
    print(
        f"{cores:.3f} cores idle with {args.sweeps} sweeps ({result['sensors']} sensors): "
        f"goal <= {GOAL_CORES} {'met' if cores <= GOAL_CORES else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
