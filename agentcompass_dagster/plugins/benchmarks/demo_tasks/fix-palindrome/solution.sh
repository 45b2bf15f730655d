#!/usr/bin/env bash
set -eu
sed -i 's/cleaned = \[c for c in text if c.isalnum()\]/cleaned = [c.lower() for c in text if c.isalnum()]/' palindrome.py
