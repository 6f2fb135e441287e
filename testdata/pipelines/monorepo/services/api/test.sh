#!/bin/sh
set -eu
got=$(echo world | ./server.sh)
[ "$got" = '{"message": "hello, world"}' ] || { echo "api: got $got"; exit 1; }
echo "api tests passed"
