#!/bin/bash
[ "$(cat /app/log.txt 2>/dev/null)" = "$(printf 'one\ntwo')" ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
