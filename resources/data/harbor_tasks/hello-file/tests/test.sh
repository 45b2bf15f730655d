#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat hello.txt 2>/dev/null)" = "Hello, Harbor!" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
