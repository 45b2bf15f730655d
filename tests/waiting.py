"""The one way a test waits for something: poll a condition until it holds, within a bounded timeout, and
fail saying what was awaited (with, when given, how the process being watched ended and its log's tail)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

# Every poll ends well within a minute: a wait longer than that is a hang to report, not to sit out.
MAX_TIMEOUT_S = 50.0
TAIL_LINES = 40


def wait_until(
    condition: Callable[[], T | None | bool],
    what: str,
    timeout: float = MAX_TIMEOUT_S,
    *,
    proc: subprocess.Popen[Any] | None = None,
    proc_may_exit: bool = False,
    log: Path | None = None,
    describe: Callable[[], object] | None = None,
    interval: float = 0.05,
) -> T:
    """Poll ``condition`` every ``interval`` seconds until it returns something truthy, and return that.

    ``what`` names what is awaited ("t0 to be materialized"). After ``timeout`` seconds the test fails
    with ``what``, the timeout, whether ``proc`` has exited, the tail of ``log`` and ``describe()`` (what
    was seen instead). When ``proc`` exits before the condition holds the test fails at once with its
    exit code (and the tail of ``log``, or of its stderr pipe), unless ``proc_may_exit``."""
    if not 0 < timeout <= MAX_TIMEOUT_S:
        raise ValueError(f"wait_until({what!r}): timeout {timeout}s is not within (0, {MAX_TIMEOUT_S}]")
    deadline = time.monotonic() + timeout
    while True:
        if value := condition():
            return value  # type: ignore[return-value]
        if proc is not None and not proc_may_exit and proc.poll() is not None:
            if value := condition():  # it held as the process ended
                return value  # type: ignore[return-value]
            pytest.fail(
                _message(
                    f"the process (pid {proc.pid}) exited with {proc.returncode} while waiting for {what}",
                    proc,
                    log,
                    describe,
                )
            )
        if time.monotonic() >= deadline:
            state = (
                ""
                if proc is None
                else (
                    f"; the process (pid {proc.pid}) "
                    + ("still runs" if proc.poll() is None else f"exited with {proc.returncode}")
                )
            )
            pytest.fail(_message(f"timed out after {timeout:g}s waiting for {what}{state}", proc, log, describe))
        time.sleep(interval)


def _message(
    head: str, proc: subprocess.Popen[Any] | None, log: Path | None, describe: Callable[[], object] | None
) -> str:
    parts = [head]
    if describe is not None:
        parts.append(f"seen: {describe()}")
    if log is not None:
        parts.append(f"--- last {TAIL_LINES} lines of {log} ---\n{tail(log)}")
    elif proc is not None and proc.poll() is not None and proc.stderr is not None:
        try:
            _, err = proc.communicate(timeout=5)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            err = ""
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
        parts.append(f"--- end of its stderr ---\n{(err or '')[-3000:]}")
    return "\n".join(parts)


def tail(log: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' when there is none yet)."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.is_file() else ""
