#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f emails.txt ] || fail "emails.txt does not exist"
expected="ann.lee@example.com
bo.chen@example.org
cy@example.net
ann.lee@example.com
dee.fox@example.com"
got="$(tr -d '\r' < emails.txt)"
[ "$got" = "$expected" ] || fail "emails.txt does not contain the 5 email values in row order (without header)"
echo "OK"
