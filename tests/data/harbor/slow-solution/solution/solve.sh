#!/bin/bash
sleep 30
echo late > /app/late.txt
