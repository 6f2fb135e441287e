#!/usr/bin/env bash
# golangci-lint.sh — install, once, the golangci-lint release `make lint`
# runs, and print the binary's path. It is installed with `go install`
# through the Go module proxy into a cache directory outside the
# repository, keyed by version: later runs only report the cached
# binary's version and print its path.
#
#   GOLANGCI_LINT_VERSION the release to install (default v2.15.0)
#   KICI_TEST_CACHE       where built test tools live (default /var/cache/kici-test,
#                         or ~/.cache/kici-test when that is not writable)
set -euo pipefail

version=${GOLANGCI_LINT_VERSION:-v2.15.0}
root=${KICI_TEST_CACHE:-/var/cache/kici-test}
if ! mkdir -p "$root" 2>/dev/null || [ ! -w "$root" ]; then
	root=${XDG_CACHE_HOME:-$HOME/.cache}/kici-test
	mkdir -p "$root"
fi
out=$root/golangci-lint-$version
bin=$out/golangci-lint

if [ ! -x "$bin" ]; then
	echo "installing golangci-lint $version into $out (first run takes a few minutes)" >&2
	mkdir -p "$out"
	# Built outside the module so kici's go.mod and go.sum stay untouched.
	(cd "$out" && GOBIN="$out" GOFLAGS= go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version")
fi
echo "golangci-lint: $("$bin" version --short 2>/dev/null || "$bin" --version)" >&2
echo "$bin"
