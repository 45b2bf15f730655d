#!/bin/bash
mkdir -p /logs/verifier
python3 - <<'PY'
import json
try:
    ok = json.load(open("config.json")) == {"name": "harbor", "workers": 4, "debug": False}
except Exception:
    ok = False
json.dump({"reward": 1.0 if ok else 0.0}, open("/logs/verifier/reward.json", "w"))
PY
