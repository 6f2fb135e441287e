#!/usr/bin/env bash
# build.sh — build, once, the Kubernetes control plane and node binaries the
# Kubernetes tests run (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet), install etcd and the node's runtime from Debian,
# and print the directory of the binaries.
#
# k8s.io/kubernetes is not meant to be used as a module: its go.mod points
# every k8s.io/* staging module at ./staging/src/..., which `go install
# module@version` refuses. So a scratch module is generated under the cache
# (never in kici's own go.mod): it requires k8s.io/kubernetes at the release
# and replaces each staging module (the list is read from that release's own
# go.mod) with its published v0.X.Y, then builds the commands. The
# binaries are kept keyed by version: a later run finds them (checked with
# `go version -m`, which names the k8s.io/kubernetes they were built from)
# and prints the directory at once, touching no network.
#
# etcd (Debian's etcd-server), containerd, runc and the CNI plugins
# (containernetworking-plugins) come from Debian: as root the missing ones
# are installed with apt-get; otherwise the exact command is printed.
#
#   KUBERNETES_VERSION  the release to build (default 1.37.2)
#   KICI_K8S_CACHE      where the scratch module and binaries live
#                       (default /var/cache/kici-k8s)
set -euo pipefail

version=${KUBERNETES_VERSION:-1.37.2}
staging=0.${version#1.} # k8s.io/kubernetes v1.X.Y publishes its staging modules as v0.X.Y
root=${KICI_K8S_CACHE:-/var/cache/kici-k8s}
src=$root/src
bin=$root/bin
# kube-proxy makes Services (ClusterIP, the kubernetes Service that
# in-cluster clients dial) reachable from the pods.
commands=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
packages=(
	etcd-server                # etcd 3.4, the API server's store
	containerd                 # the node's container runtime (its own instance: scripts/k8s/cluster.sh)
	runc                       # containerd's OCI runtime
	containernetworking-plugins # bridge, host-local, loopback, portmap: the pods' network
	iptables                   # the bridge and portmap plugins program NAT with it
	openssl                    # scripts/k8s/cluster.sh makes the cluster's certificates with it
	conntrack                  # the kubelet and portmap clear stale NAT entries with it
)

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

debian_packages() {
	command -v dpkg-query >/dev/null 2>&1 || return 0
	local missing=() p
	for p in "${packages[@]}"; do
		installed "$p" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local cmd="apt-get update && apt-get install -y ${missing[*]}"
	if [ "$(id -u)" != 0 ]; then
		echo "build.sh: missing Debian packages: ${missing[*]}; as root run:" >&2
		echo "  sudo sh -c '$cmd'" >&2
		exit 1
	fi
	echo "build.sh: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y "${missing[@]}" >&2 || { apt-get update >&2 && apt-get install -y "${missing[@]}" >&2; }
	# Debian's etcd-server package starts a system etcd on 2379 where an
	# init system runs; the cluster runs its own on other ports, so that one
	# is left alone.
}

# built reports whether binary $1 is present and was built from
# k8s.io/kubernetes at $version (Go records the module versions a binary
# was linked from; `go version -m` prints them: "mod" for the module of
# the command itself).
built() {
	[ -x "$bin/$1" ] &&
		go version -m "$bin/$1" 2>/dev/null | grep -Eq "^[[:space:]]+(mod|dep)[[:space:]]+k8s.io/kubernetes[[:space:]]+v$version([[:space:]]|$)"
}

# foreign_build waits for a `go build` of these commands started by hand
# (not by this script, whose own runs serialise on the lock below) so that
# two builds never compete for the same cache directory.
foreign_build() {
	local pids
	while pids=$(pgrep -f "go build .*k8s.io/kubernetes/cmd/kube-apiserver" || true) && [ -n "$pids" ]; do
		echo "build.sh: waiting for the build already running (pid $(echo $pids | tr '\n' ' '))" >&2
		sleep 20
	done
}

# scratch_module writes the scratch module's go.mod and tools.go into $1.
scratch_module() {
	local dir=$1 kmod goline mods m
	kmod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	if [ -z "$kmod" ] || [ ! -f "$kmod" ]; then
		echo "build.sh: the Go module proxy did not give k8s.io/kubernetes@v$version" >&2
		exit 1
	fi
	goline=$(grep -m1 '^go ' "$kmod")
	mods=$(sed -n 's|^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*|\1|p' "$kmod")
	if [ -z "$mods" ]; then
		echo "build.sh: no staging replace lines in k8s.io/kubernetes@v$version's go.mod" >&2
		exit 1
	fi
	{
		echo "module kici.dev/k8sbuild"
		echo
		echo "$goline"
		echo
		echo "require k8s.io/kubernetes v$version"
		echo
		echo "replace ("
		for m in $mods; do
			printf '\t%s => %s v%s\n' "$m" "$m" "$staging"
		done
		echo ")"
	} >"$dir/go.mod"
	{
		echo "//go:build tools"
		echo
		echo "package tools"
		echo
		echo "import ("
		for m in "${commands[@]}"; do
			printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$m"
		done
		echo ")"
	} >"$dir/tools.go"
	(cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
}

debian_packages
mkdir -p "$root"
exec 9>"$root/build.lock"
flock 9
foreign_build
missing=()
for c in "${commands[@]}"; do
	built "$c" || missing+=("$c")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "$bin"
	exit 0
fi

echo "building Kubernetes v$version's ${missing[*]} (once; took 55 minutes on 2 busy cores for all) into $bin" >&2
mkdir -p "$src" "$bin"
scratch_module "$src"
# The version variables are what `--version` and the Node object's
# kubeletVersion report; without them they read v0.0.0-master.
ldflags="-s -w"
major=$(echo "$version" | cut -d. -f1)
minor=$(echo "$version" | cut -d. -f2)
for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $v.gitVersion=v$version -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
done
tmp=$bin/.build.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
pkgs=()
for c in "${missing[@]}"; do
	pkgs+=("k8s.io/kubernetes/cmd/$c")
done
(cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
for c in "${missing[@]}"; do
	mv "$tmp/$c" "$bin/$c"
done
rmdir "$tmp"
echo "$bin"
