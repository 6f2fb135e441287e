#!/bin/sh
# calc.sh: add and multiply two integers.
set -eu
op=$1; a=$2; b=$3
case "$op" in
  add) echo $((a + b)) ;;
  mul) echo $((a + b)) ;; # the bug this pipeline catches
  *) echo "unknown op $op" >&2; exit 2 ;;
esac
