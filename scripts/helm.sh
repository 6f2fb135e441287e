#!/usr/bin/env bash
# helm.sh — install, once, the Helm release the chart tests run
# (deploy/helm/kici; internal/helmchart), and print the binary's path. It
# is installed with `go install` through the Go module proxy into a cache
# directory outside the repository, keyed by version, so kici's go.mod and
# go.sum stay untouched: later runs print the cached path at once.
#
#   HELM_VERSION    the release to install (default v4.3.2)
#   KICI_TEST_CACHE where built test tools live (default /var/cache/kici-test,
#                   or ~/.cache/kici-test when that is not writable)
set -euo pipefail

version=${HELM_VERSION:-v4.3.2}
root=${KICI_TEST_CACHE:-/var/cache/kici-test}
if ! mkdir -p "$root" 2>/dev/null || [ ! -w "$root" ]; then
	root=${XDG_CACHE_HOME:-$HOME/.cache}/kici-test
	mkdir -p "$root"
fi
out=$root/helm-$version
bin=$out/helm

if [ ! -x "$bin" ]; then
	echo "installing helm $version into $out (first run takes a few minutes)" >&2
	mkdir -p "$out"
	major=${version%%.*}
	# Built outside the module (GOFLAGS cleared, run from the cache dir) so
	# kici's go.mod and go.sum stay untouched; the binary lands first under
	# a temporary name so an interrupted build never leaves a half binary.
	(cd "$out" && GOBIN="$out/.tmp" GOFLAGS= go install "helm.sh/helm/$major/cmd/helm@$version")
	mv "$out/.tmp/helm" "$bin"
	rmdir "$out/.tmp"
fi
echo "$bin"
