#!/usr/bin/env bash
set -eu
mkdir -p out
printf 'hello world\n' > out/hello.txt
