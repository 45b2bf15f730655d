#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
for d in project project/src project/tests project/docs; do
  [ -d "$d" ] || fail "directory $d/ does not exist"
done
for f in project/src/__init__.py project/tests/__init__.py; do
  [ -f "$f" ] || fail "file $f does not exist"
  [ -s "$f" ] && fail "file $f is not empty"
done
[ -f project/README.md ] || fail "file project/README.md does not exist"
[ "$(cat project/README.md)" = "# Project" ] || fail "project/README.md must contain exactly '# Project'"
[ -z "$(ls -A project/docs)" ] || fail "project/docs/ must be empty"
echo "OK"
