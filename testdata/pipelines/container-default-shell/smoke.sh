#!/bin/sh
# smoke.sh: stores and reads back a value in the Redis at $REDIS_HOST.
set -eu
redis-cli -h "$REDIS_HOST" SET smoke "$1" >/dev/null
echo "read back: $(redis-cli -h "$REDIS_HOST" GET smoke)"
