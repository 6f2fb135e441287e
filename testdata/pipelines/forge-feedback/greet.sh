#!/bin/sh
# greet.sh: the program under test.
echo "hello, ${1:-world}"
