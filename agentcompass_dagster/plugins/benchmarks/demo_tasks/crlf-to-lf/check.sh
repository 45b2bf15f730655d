#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f notes_unix.txt ] || fail "notes_unix.txt does not exist"
python3 -I - <<'PY' || exit 1
expected = (b"Meeting notes\n\n- ship version 1.2 on Friday\n- update the changelog\n"
            b"- ask Sam about the release blog post\n")
with open("notes_unix.txt", "rb") as f:
    got = f.read()
if b"\r" in got:
    print("FAIL: notes_unix.txt still contains carriage return characters")
    raise SystemExit(1)
if got.rstrip(b"\n") != expected.rstrip(b"\n"):
    print("FAIL: notes_unix.txt text differs from notes.txt")
    raise SystemExit(1)
PY
echo "OK"
