#!/bin/bash
[ "$(cat /app/late.txt 2>/dev/null)" = late ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
