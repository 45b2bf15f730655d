#!/usr/bin/env bash
set -eu
tail -n +2 orders.csv | cut -d, -f3 > emails.txt
