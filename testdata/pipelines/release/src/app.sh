#!/bin/sh
# app.sh: the released program.
echo "app $(cat "$(dirname "$0")/VERSION")"
