#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f people.json ] || fail "people.json does not exist"
python3 -I - <<'PY' || exit 1
import json, sys

def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)

expected = [
    {"name": "Alice", "age": 30, "city": "Berlin"},
    {"name": "Bob", "age": 25, "city": "Paris"},
    {"name": "Carol", "age": 41, "city": "Lisbon"},
    {"name": "Dave", "age": 35, "city": "Oslo"},
    {"name": "Eve", "age": 29, "city": "New York"},
]
try:
    with open("people.json", encoding="utf-8") as f:
        data = json.load(f)
except Exception as e:
    fail("people.json is not valid JSON: %s" % e)
if not isinstance(data, list):
    fail("people.json must contain a JSON array")
if len(data) != len(expected):
    fail("expected %d objects, got %d" % (len(expected), len(data)))
for i, (got, exp) in enumerate(zip(data, expected)):
    if not isinstance(got, dict) or sorted(got) != ["age", "city", "name"]:
        fail("object %d must have exactly the keys name, age, city" % i)
    if type(got["age"]) is not int:
        fail("object %d: age must be a JSON integer, got %r" % (i, got["age"]))
    if got != exp:
        fail("object %d is %r, expected %r" % (i, got, exp))
PY
echo "OK"
