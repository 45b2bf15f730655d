#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f unique.txt ] || fail "unique.txt does not exist"
expected="apple
banana
cherry
date
fig
kiwi
pear"
got="$(cat unique.txt)"
[ "$got" = "$expected" ] || fail "unique.txt content is wrong; expected the 7 distinct fruits sorted: $(echo $expected)"
echo "OK"
