#!/usr/bin/env bash
set -eu
tr -s ' \n' '\n\n' < text.txt | grep -v '^$' | LC_ALL=C sort | uniq -c \
  | awk '{print $2, $1}' | LC_ALL=C sort -k2,2nr -k1,1 > counts.txt
