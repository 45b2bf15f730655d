#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f numbers.txt ] || fail "numbers.txt does not exist"
python3 -I - <<'PY' || exit 1
with open("numbers.txt", "rb") as f:
    data = f.read()
expected = "".join("%d\n" % i for i in range(1, 101)).encode()
if data not in (expected, expected.rstrip(b"\n")):
    lines = data.decode("utf-8", "replace").split("\n")
    print("FAIL: numbers.txt does not contain exactly 1..100 one per line "
          "(got %d lines, first: %r)" % (len(lines), lines[:3]))
    raise SystemExit(1)
PY
echo "OK"
