#!/usr/bin/env bash
set -eu
awk -F, 'NR > 1 && $2 == "EU" {s += $4} END {print s+0}' sales.csv > answer.txt
