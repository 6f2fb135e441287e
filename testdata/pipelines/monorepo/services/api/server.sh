#!/bin/sh
# server.sh: the API answers one request on stdin.
. "$(dirname "$0")/../../lib/common.sh"
read -r name
echo "{\"message\": \"$(greeting "$name")\"}"
