#!/usr/bin/env bash
# gitea.sh — build, once, the Gitea release the forge tests run against, and
# print its path. The binary is cached outside the repository, keyed by
# version: later runs print the cached path at once.
#
# Gitea's go.mod has replace directives, so it cannot be installed with
# `go install module@version`: its module is downloaded through the Go
# module proxy, copied to a writable directory and built there as the main
# module, with the SQLite driver compiled in (cgo).
#
#   GITEA_VERSION   the release to build (default 1.27.3)
#   KICI_TEST_CACHE where built test tools live (default /var/cache/kici-test,
#                   or ~/.cache/kici-test when that is not writable)
set -euo pipefail

version=${GITEA_VERSION:-1.27.3}
root=${KICI_TEST_CACHE:-/var/cache/kici-test}
if ! mkdir -p "$root" 2>/dev/null || [ ! -w "$root" ]; then
	root=${XDG_CACHE_HOME:-$HOME/.cache}/kici-test
	mkdir -p "$root"
fi
out=$root/gitea-$version
bin=$out/gitea
# moddir prints the module's directory in the module cache (downloading it
# through the Go module proxy when needed).
moddir() {
	local dir
	dir=$(go mod download -json "code.gitea.io/gitea@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
		echo "gitea.sh: the Go module proxy did not give code.gitea.io/gitea@v$version" >&2
		exit 1
	fi
	echo "$dir"
}

# assets copies what Gitea reads from disk when it is built without the
# bindata tag (locales, mail and page templates, public files) beside the
# binary: the test's app.ini points STATIC_ROOT_PATH there.
assets() {
	local dir=$1 d
	for d in options templates public; do
		rm -rf "$out/$d.tmp"
		cp -R "$dir/$d" "$out/$d.tmp"
		chmod -R u+w,go+rX "$out/$d.tmp"
		rm -rf "${out:?}/$d"
		mv "$out/$d.tmp" "$out/$d"
	done
}

if [ -x "$bin" ] && [ -d "$out/options" ] && [ -d "$out/templates" ] && [ -d "$out/public" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$out"
if [ -x "$bin" ]; then
	assets "$(moddir)"
	echo "$bin"
	exit 0
fi

echo "building Gitea $version (once; a few minutes on 2 cores) into $out" >&2
dir=$(moddir)
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp -R "$dir"/. "$src"
chmod -R u+w "$src"
(cd "$src" && CGO_ENABLED=1 go build -trimpath -tags 'sqlite sqlite_unlock_notify' \
	-ldflags "-s -w -X main.Version=$version" -o "$bin.tmp" .)
chmod 0755 "$bin.tmp"
assets "$dir"
mv "$bin.tmp" "$bin"
echo "$bin"
