#!/usr/bin/env bash
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -f settings.conf ] || fail "settings.conf does not exist"
python3 -I - <<'PY' || exit 1
expected = """# Service settings (staging environment template)
[api]
url = https://prod.example.com/api/v1
timeout = 30

[auth]
issuer = https://prod.example.com/auth
audience = prod.example.com

[storage]
bucket = assets-staging
endpoint = files.prod.example.com
"""
with open("settings.conf", encoding="utf-8", newline="") as f:
    got = f.read()
if got.rstrip("\n") != expected.rstrip("\n"):
    if "staging.example.com" in got:
        print("FAIL: settings.conf still contains staging.example.com")
    else:
        print("FAIL: settings.conf content differs from the expected result "
              "(only staging.example.com -> prod.example.com may change)")
    raise SystemExit(1)
PY
echo "OK"
