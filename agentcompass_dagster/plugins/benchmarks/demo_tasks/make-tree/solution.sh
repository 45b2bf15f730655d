#!/usr/bin/env bash
set -eu
mkdir -p project/src project/tests project/docs
: > project/src/__init__.py
: > project/tests/__init__.py
printf '# Project\n' > project/README.md
