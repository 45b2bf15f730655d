#!/usr/bin/env bash
set -eu
awk '{print $1}' access.log | sort -u | wc -l | tr -d ' ' > answer.txt
