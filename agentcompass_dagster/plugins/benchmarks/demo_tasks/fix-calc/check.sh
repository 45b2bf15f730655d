#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f calc.py ] || fail "calc.py does not exist"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp calc.py "$tmp/calc.py"
python3 -I - "$tmp" <<'PY' || exit 1
import os
import sys
sys.path.insert(0, os.environ["JUDGE_DIR"])
from judge import isolated_module
try:
    calc = isolated_module(sys.argv[1] + "/calc.py")
except Exception as e:
    print("FAIL: cannot import calc.py: %r" % (e,))
    sys.exit(1)
cases = [
    ("add(2, 3)", lambda: calc.add(2, 3), 5),
    ("add(-1, 1)", lambda: calc.add(-1, 1), 0),
    ("subtract(10, 4)", lambda: calc.subtract(10, 4), 6),
    ("subtract(4, 10)", lambda: calc.subtract(4, 10), -6),
    ("subtract(0, 7)", lambda: calc.subtract(0, 7), -7),
    ("multiply(3, 4)", lambda: calc.multiply(3, 4), 12),
    ("multiply(-2, 5)", lambda: calc.multiply(-2, 5), -10),
    ("mean([1, 2])", lambda: calc.mean([1, 2]), 1.5),
    ("mean([2, 4, 6])", lambda: calc.mean([2, 4, 6]), 4),
    ("mean([1, 2, 2])", lambda: calc.mean([1, 2, 2]), 5 / 3),
    ("mean([7])", lambda: calc.mean([7]), 7),
    ("mean([-1, 0])", lambda: calc.mean([-1, 0]), -0.5),
]
for name, fn, exp in cases:
    try:
        got = fn()
    except Exception as e:
        print("FAIL: %s raised %r" % (name, e))
        sys.exit(1)
    if not isinstance(got, (int, float)) or abs(got - exp) > 1e-9:
        print("FAIL: %s returned %r, expected %r" % (name, got, exp))
        sys.exit(1)
PY
echo "OK"
