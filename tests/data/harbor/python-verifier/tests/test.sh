#!/usr/bin/env python3
import pathlib

status = pathlib.Path("/app/status.txt")
ok = status.is_file() and status.read_text().strip() == "done"
print("status:", status.read_text().strip() if status.is_file() else "missing")
pathlib.Path("/logs/verifier/reward.txt").write_text("1" if ok else "0")
