#!/usr/bin/env bash
set -eu
LC_ALL=C sort -u fruits.txt > unique.txt
