#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f answer.txt ] || fail "answer.txt does not exist"
ans="$(tr -d '[:space:]' < answer.txt | tr '[:upper:]' '[:lower:]')"
[ -n "$ans" ] || fail "answer.txt is empty"
[ "$ans" = "dmitri" ] || fail "wrong answer: '$ans'"
echo "OK"
