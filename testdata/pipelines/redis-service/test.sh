#!/bin/sh
# test.sh: the rate limiter against a real Redis at $REDIS_HOST.
set -u
fails=0
expect() { # expect allowed|denied USER LIMIT
  if out=$(./ratelimit.sh "$2" "$3"); then got=allowed; else got=denied; fi
  if [ "$got" = "$1" ]; then echo "PASS $out"; else echo "FAIL want $1: $out"; fails=$((fails + 1)); fi
}
for i in 1 2 3; do expect allowed alice 3; done
expect denied alice 3
expect allowed bob 3
echo "keys in redis: $(redis-cli -h "$REDIS_HOST" DBSIZE)"
[ "$fails" = 0 ] && echo "all tests passed"
exit "$fails"
