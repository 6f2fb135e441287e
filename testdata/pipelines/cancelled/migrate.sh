#!/bin/sh
# migrate.sh: applies each migration in order; a long one stands for a
# migration an operator stops halfway.
set -eu
for m in migrations/*.sql; do
  echo "applying $m"
done
echo "migration started"
# The long part: wait until cancelled (the job's cancel stops it).
while :; do sleep 1; done
