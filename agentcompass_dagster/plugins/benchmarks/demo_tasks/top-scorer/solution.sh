#!/usr/bin/env bash
set -eu
tail -n +2 users.csv | sort -t, -k2,2nr | head -n 1 | cut -d, -f1 > answer.txt
