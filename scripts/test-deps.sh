#!/usr/bin/env bash
# Installs the Debian packages `make test` needs, when any is missing, then
# builds the Gitea release the forge tests run against (scripts/gitea.sh)
# and the Helm release the chart tests use (scripts/helm.sh); both are
# cached, so only the first run on a machine pays their few minutes.
# The golangci-lint release is installed (once, cached the same way) by
# the lint of make test itself, which runs beside the unit tests so a first
# install costs no wall time (scripts/golangci-lint.sh).
# Idempotent: with everything installed it changes nothing and touches no
# network. As root it runs `apt-get update` once, then `apt-get install -y`
# of the missing packages; as another user it stops with the exact command
# to run.
#
# To add a dependency, add its Debian package name to PACKAGES with a
# comment saying which tests need it.
set -euo pipefail

PACKAGES=(
  postgresql-15   # initdb/postgres: the store conformance suite and e2e on a throwaway PostgreSQL; its client pg_dump/pg_restore: the PostgreSQL restore test
  busybox-static  # the container-scaler tests build an agent image FROM scratch with a static busybox
  git             # tests create repositories and commits
  chromium        # the web UI browser tests (e2e, driven with chromedp) and make screenshots
  python3-venv    # the pipeline corpus's Python project (testdata/pipelines/python-venv) creates a virtualenv with Debian's python3
  redis-server    # the pipeline corpus's service container image (testdata/pipelines/redis-service), built FROM scratch
  qemu-system-x86 # the qemu scaler's e2e test boots real job VMs (e2e/vm_test.go; its kernel comes from scripts/vm-image.sh)
  iproute2        # ip: the firecracker host tests create a real bridge and TAPs (internal/scaler/firecracker_realhost_test.go)
  nftables        # nft: the same tests apply and read the VMs' nftables table
)

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "test-deps: no dpkg here; make sure these are installed: ${PACKAGES[*]}" >&2
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done
# gitea builds (once, cached by version) the real Gitea the corpus's
# Gitea pipelines push to (e2e/gitea_harness_test.go).
gitea() { bash "$(dirname "$0")/gitea.sh" >/dev/null; }
# helm installs (once, cached by version) the Helm release the chart tests
# render and lint deploy/helm/kici with (internal/helmchart).
helm() { bash "$(dirname "$0")/helm.sh" >/dev/null; }
tools() { gitea; helm; }

if [ ${#missing[@]} -eq 0 ]; then
  tools
  exit 0
fi

cmd="apt-get update && apt-get install -y ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
  echo "test-deps: missing packages: ${missing[*]}" >&2
  echo "install them as root, then run make test again:" >&2
  echo "  sudo sh -c '$cmd'" >&2
  exit 1
fi
echo "test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y "${missing[@]}"
tools
