#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -d out ] || fail "directory out/ does not exist"
[ -f out/hello.txt ] || fail "out/hello.txt does not exist"
python3 -I - <<'PY' || exit 1
with open("out/hello.txt", "rb") as f:
    data = f.read()
if data not in (b"hello world\n", b"hello world"):
    print("FAIL: out/hello.txt content is %r, expected 'hello world\\n'" % data[:80])
    raise SystemExit(1)
PY
echo "OK"
