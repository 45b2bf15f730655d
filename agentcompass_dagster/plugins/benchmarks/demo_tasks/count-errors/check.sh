#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f answer.txt ] || fail "answer.txt does not exist"
ans="$(tr -d '[:space:]' < answer.txt)"
[ -n "$ans" ] || fail "answer.txt is empty"
[ "$ans" = "5" ] || fail "wrong answer: '$ans'"
echo "OK"
