#!/usr/bin/env bash
set -eu
python3 - <<'PY'
import csv, json
with open("people.csv", newline="", encoding="utf-8") as f:
    rows = [{"name": r["name"], "age": int(r["age"]), "city": r["city"]}
            for r in csv.DictReader(f)]
with open("people.json", "w", encoding="utf-8") as f:
    json.dump(rows, f, indent=2)
    f.write("\n")
PY
