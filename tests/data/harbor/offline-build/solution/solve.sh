#!/bin/bash
cp /opt/tool/VERSION /app/version.txt
