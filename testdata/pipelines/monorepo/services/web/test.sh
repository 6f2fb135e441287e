#!/bin/sh
set -eu
got=$(./render.sh)
[ "$got" = '<h1>hello, visitor</h1>' ] || { echo "web: got $got"; exit 1; }
echo "web tests passed"
