#!/usr/bin/env bash
set -eu
awk '$3 == "ERROR" {n++} END {print n+0}' app.log > answer.txt
