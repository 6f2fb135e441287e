#!/bin/sh
# build.sh: packages the app into dist/ with its checksums.
set -eu
mkdir -p dist pkg
cp src/app.sh VERSION pkg/
tar -C pkg -czf "dist/app-$(cat VERSION).tar.gz" .
(cd dist && sha256sum ./*.tar.gz > SHA256SUMS)
echo "packaged app-$(cat VERSION).tar.gz with its SHA256SUMS"
