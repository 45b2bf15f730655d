#!/bin/bash
[ "$(cat /app/log.txt 2>/dev/null)" = one ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
