#!/bin/sh
# build.sh: builds bin/service against the fetched dependencies.
set -eu
mkdir -p bin
{
  echo '#!/bin/sh'
  echo "# built with: $(cat .deps/* | tr '\n' ' ')"
  echo 'case "$1" in selftest) echo "selftest shard $2 passed";; *) echo "service '"$(cat VERSION)"'";; esac'
} > bin/service
chmod +x bin/service
echo "built bin/service $(cat VERSION)"
