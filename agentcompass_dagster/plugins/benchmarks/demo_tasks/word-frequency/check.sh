#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f counts.txt ] || fail "counts.txt does not exist"
expected="the 5
on 3
a 2
cat 2
dog 2
mat 2
sat 2
and 1
log 1
met 1"
got="$(tr -d '\r' < counts.txt)"
[ "$got" = "$expected" ] || fail "counts.txt is wrong; expected lines '<word> <count>' sorted by count desc, then word asc (first line should be 'the 5')"
echo "OK"
