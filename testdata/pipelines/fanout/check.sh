#!/bin/sh
# check.sh N: checks the Nth case of cases.txt (a shard of the suite).
set -eu
case=$(sed -n "${1}p" cases.txt)
[ -n "$case" ] || { echo "no case $1"; exit 1; }
echo "shard $1 checked $case"
echo "$case" > "result-$1.txt"
