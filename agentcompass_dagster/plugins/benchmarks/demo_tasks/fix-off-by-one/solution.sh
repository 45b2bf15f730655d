#!/usr/bin/env bash
set -eu
sed -i 's/return list(range(start, end))/return list(range(start, end + 1))/' ranges.py
