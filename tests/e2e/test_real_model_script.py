"""perf/real_model.py takes any GGUF a user has (--model-file) and refuses a missing one in one line."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_a_missing_model_file_is_one_line_and_exit_2() -> None:
    """--model-file names the GGUF llama-server serves (the script was wired to one model package); a path
    that is no file is refused before anything starts: exit 2, one line naming the option and the path."""
    done = subprocess.run(
        [sys.executable, str(REPO / "perf" / "real_model.py"), "--model-file", "/no/such.gguf"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("error: --model-file /no/such.gguf: no such file")
    assert "Traceback" not in done.stderr
