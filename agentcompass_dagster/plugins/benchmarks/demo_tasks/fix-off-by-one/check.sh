#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f ranges.py ] || fail "ranges.py does not exist"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp ranges.py "$tmp/ranges.py"
# Isolated interpreter (-I): only the copied module is importable from $tmp,
# so nothing else in the working directory can influence the result.
python3 -I - "$tmp" <<'PY' || exit 1
import os
import sys
sys.path.insert(0, os.environ["JUDGE_DIR"])
from judge import isolated_module
try:
    ranges = isolated_module(sys.argv[1] + "/ranges.py")
    inclusive_range, range_sum = ranges.inclusive_range, ranges.range_sum
except Exception as e:
    print("FAIL: cannot import ranges.py: %r" % (e,))
    sys.exit(1)
cases = [
    (lambda: inclusive_range(1, 3), [1, 2, 3]),
    (lambda: inclusive_range(5, 5), [5]),
    (lambda: inclusive_range(4, 2), []),
    (lambda: inclusive_range(-2, 1), [-2, -1, 0, 1]),
    (lambda: inclusive_range(0, 9), list(range(10))),
    (lambda: range_sum(1, 10), 55),
    (lambda: range_sum(1, 100), 5050),
    (lambda: range_sum(7, 7), 7),
    (lambda: range_sum(3, 1), 0),
]
for i, (fn, exp) in enumerate(cases):
    try:
        got = fn()
    except Exception as e:
        print("FAIL: case %d raised %r" % (i, e))
        sys.exit(1)
    if got != exp:
        print("FAIL: case %d returned %r, expected %r" % (i, got, exp))
        sys.exit(1)
PY
echo "OK"
