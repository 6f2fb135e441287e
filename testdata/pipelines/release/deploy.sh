#!/bin/sh
# deploy.sh: "deploys" the downloaded package (unpacks and runs it).
set -eu
mkdir -p "deployed/$TARGET"
tar -C "deployed/$TARGET" -xzf "dist/app-$VERSION.tar.gz"
echo "deploying $(sh "deployed/$TARGET/app.sh") to $TARGET ($REGION) with $REPLICAS replicas"
