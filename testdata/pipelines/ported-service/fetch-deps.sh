#!/bin/sh
# fetch-deps.sh: "downloads" each dependency of deps.lock into .deps/ (the
# node_modules / vendor / .venv pattern: a directory a step creates).
set -eu
mkdir -p .deps
grep -v '^#' deps.lock | while read -r name version; do
  printf '%s %s\n' "$name" "$version" > ".deps/$name"
  echo "fetched $name $version"
done
