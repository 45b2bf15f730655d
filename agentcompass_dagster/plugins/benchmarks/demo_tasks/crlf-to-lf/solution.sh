#!/usr/bin/env bash
set -eu
tr -d '\r' < notes.txt > notes_unix.txt
