#!/usr/bin/env bash
set -eu
sed -i 's/staging\.example\.com/prod.example.com/g' settings.conf
