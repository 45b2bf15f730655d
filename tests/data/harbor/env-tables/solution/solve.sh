#!/bin/bash
printf "%s" "$ANSWER" > /app/answer.txt
printf "%s" "$APP_MODE" > /app/mode.txt
printf "%s" "$SECRET_PHRASE" > /app/phrase.txt
