#!/usr/bin/env bash
set -eu
cat > config.json <<'JSON'
{
  "name": "demo-app",
  "version": 3,
  "debug": false,
  "ports": [8080, 8081]
}
JSON
