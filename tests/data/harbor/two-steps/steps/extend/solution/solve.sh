#!/bin/bash
cat /app/seed.txt >> /app/log.txt
