#!/usr/bin/env bash
set -eu
seq 1 100 > numbers.txt
