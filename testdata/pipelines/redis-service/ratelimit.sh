#!/bin/sh
# ratelimit.sh USER LIMIT: counts one request of USER in Redis and allows
# it while the user's count in the current window is at most LIMIT.
set -eu
host=${REDIS_HOST:-127.0.0.1}
n=$(redis-cli -h "$host" INCR "rl:$1")
[ "$n" = 1 ] && redis-cli -h "$host" EXPIRE "rl:$1" 60 >/dev/null
if [ "$n" -gt "$2" ]; then
  echo "denied $1 ($n > $2)"
  exit 1
fi
echo "allowed $1 ($n/$2)"
