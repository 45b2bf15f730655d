"""The live progress display: on for a terminal, off for pipes and files."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_cli_process


def test_progress_shows_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal `agentcompass run` draws tasks done, the runs in flight, errors and the rate while
    the sweep's runs execute (from the events they record as each task ends)."""
    shutil.copytree(REPO / "resources", tmp_path / "resources")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentcompass_dagster.cli", "run"],
        cwd=tmp_path, stdin=follower, stdout=follower, stderr=follower, env={**os.environ, "COLUMNS": "160"},
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    assert proc.wait(timeout=120) == 0
    text = output.decode(errors="replace")
    assert "demo/none" in text and "runs in flight" in text and "errors" in text and "tasks/s" in text
    assert "18/18" in text


def test_progress_is_off_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    """Piped output holds the summary and the run directory only, no progress lines."""
    shutil.copytree(REPO / "resources", tmp_path / "resources")
    proc = run_cli_process("run", cwd=tmp_path)
    assert proc.returncode == 0
    assert "tasks/s" not in proc.stdout and "\x1b[" not in proc.stdout
    assert proc.stdout.startswith("# demo")
