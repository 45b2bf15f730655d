#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f config.json ] || fail "config.json does not exist"
python3 -I - <<'PY' || exit 1
import json, sys

def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)

try:
    with open("config.json", encoding="utf-8") as f:
        cfg = json.load(f)
except Exception as e:
    fail("config.json is not valid JSON: %s" % e)
if not isinstance(cfg, dict):
    fail("config.json must contain a JSON object")
if sorted(cfg) != ["debug", "name", "ports", "version"]:
    fail("keys must be exactly name, version, debug, ports; got %s" % sorted(cfg))
if cfg["name"] != "demo-app":
    fail("name must be the string 'demo-app'")
if type(cfg["version"]) is not int or cfg["version"] != 3:
    fail("version must be the integer 3")
if cfg["debug"] is not False:
    fail("debug must be the boolean false")
p = cfg["ports"]
if not (isinstance(p, list) and len(p) == 2 and all(type(x) is int for x in p) and p == [8080, 8081]):
    fail("ports must be the list [8080, 8081]")
PY
echo "OK"
