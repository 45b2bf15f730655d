#!/bin/bash
python3 - <<'PY'
import json, pathlib
want = [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89]
try:
    got = [int(line) for line in pathlib.Path("fib.txt").read_text().split()]
except (OSError, ValueError):
    got = []
correct = 1 if got == want else 0
partial = sum(a == b for a, b in zip(got, want)) / len(want)
json.dump({"correctness": correct, "coverage": partial, "note": "not a number: ignored"},
          open("/logs/verifier/reward.json", "w"))
PY
