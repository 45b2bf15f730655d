#!/bin/bash
# A nop agent leaves no answer: with $EXPECTED unset both sides would be empty and it would pass.
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$EXPECTED" ] && [ "$(cat /app/mode.txt 2>/dev/null)" = "$APP_MODE" ] \
   && [ "$(cat /app/phrase.txt 2>/dev/null)" = "$SECRET_PHRASE" ]; then
  echo "answer matches; phrase $SECRET_PHRASE"
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
