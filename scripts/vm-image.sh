#!/usr/bin/env bash
# vm-image.sh — builds the guest image of the qemu scaler's job VMs from
# Debian packages and kici's static binaries (docs/scaling.md, "QEMU
# microVMs"):
#   <out>/vmlinuz         Debian's linux-image-amd64 kernel
#   <out>/initramfs.cpio  the root file system, in guest memory: kici-vm-init
#                         as /init, kici-agent and kici-step-supervisor,
#                         busybox (sh and the usual tools), bash and git
#                         with their libraries, and the virtio network driver
# Usage: scripts/vm-image.sh [OUT]   (default /var/cache/kici-vm; needs
# `make build` first, or KICI_BIN_DIR naming a directory with the static
# binaries). It prints OUT. The kernel package is downloaded once into
# KICI_VM_CACHE (default /var/cache/kici-vm); the initramfs is rebuilt on
# every run (a few seconds) so it always holds the binaries given. Needs
# apt-get download (or a kernel .deb already in the cache) and a static
# busybox (busybox-static).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${KICI_VM_CACHE:-/var/cache/kici-vm}
out=${1:-$cache}
bin=${KICI_BIN_DIR:-bin}
mkdir -p "$out" "$cache"
log() { echo "vm-image: $*" >&2; }

for b in kici-agent kici-step-supervisor kici-vm-init; do
	[ -x "$bin/$b" ] || { log "$bin/$b missing: run \`make build\` first"; exit 1; }
done
busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked'; then
	busybox=/bin/busybox
	[ -x $busybox ] || { log "a static busybox is needed: apt-get install busybox-static"; exit 1; }
fi

# The kernel: the version linux-image-amd64 points at, downloaded once.
deb=$(ls "$cache"/linux-image-*-amd64_*.deb 2>/dev/null | grep -v 'linux-image-amd64_' | sort | tail -1 || true)
if [ -z "$deb" ]; then
	pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
	[ -n "$pkg" ] || { log "cannot tell which kernel linux-image-amd64 depends on (apt-get update?)"; exit 1; }
	log "downloading $pkg"
	(cd "$cache" && apt-get download "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2)
	deb=$(ls "$cache"/"$pkg"_*.deb)
fi
kroot="$cache/kernel"
if [ ! -d "$kroot/boot" ]; then
	rm -rf "$kroot.tmp" && dpkg-deb -x "$deb" "$kroot.tmp" && mv "$kroot.tmp" "$kroot"
fi
cp "$(ls "$kroot"/boot/vmlinuz-* | head -1)" "$out/vmlinuz.tmp" && mv "$out/vmlinuz.tmp" "$out/vmlinuz"
kver=$(basename "$(ls -d "$kroot"/lib/modules/*)")

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/lib/git-core,etc,root,tmp,proc,sys,dev,run,kici,lib/modules}
chmod 1777 "$stage/tmp"
cp "$bin/kici-vm-init" "$stage/init"
cp "$bin/kici-agent" "$bin/kici-step-supervisor" "$stage/bin/"
cp "$busybox" "$stage/bin/busybox"
for applet in $("$stage/bin/busybox" --list); do
	[ -e "$stage/bin/$applet" ] || ln -s busybox "$stage/bin/$applet"
done

# git and the shared libraries it and its HTTP helper load.
copy_with_libs() {
	local f=$1 dest=$2
	mkdir -p "$stage$(dirname "$dest")"
	cp -L "$f" "$stage$dest"
	ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
		[ -e "$stage$lib" ] && continue
		mkdir -p "$stage$(dirname "$lib")"
		cp -L "$lib" "$stage$lib"
	done
}
copy_with_libs "$(command -v git)" /usr/bin/git
# bash: steps run with bash by default (kici's default shell).
copy_with_libs /bin/bash /usr/bin/bash
for helper in git-remote-http; do
	[ -x /usr/lib/git-core/$helper ] && copy_with_libs /usr/lib/git-core/$helper /usr/lib/git-core/$helper
done
ln -sf ../../bin/git "$stage/usr/lib/git-core/git"
for h in git-remote-https; do ln -sf git-remote-http "$stage/usr/lib/git-core/$h"; done
[ -d /usr/share/git-core/templates ] && mkdir -p "$stage/usr/share/git-core" && cp -r /usr/share/git-core/templates "$stage/usr/share/git-core/"
[ -f /etc/ssl/certs/ca-certificates.crt ] && mkdir -p "$stage/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$stage/etc/ssl/certs/"

# The virtio network driver and what it needs, in load order.
: > "$stage/kici/modules.order"
for m in drivers/virtio/virtio_ring.ko drivers/virtio/virtio.ko drivers/virtio/virtio_pci_legacy_dev.ko \
	drivers/virtio/virtio_pci_modern_dev.ko drivers/virtio/virtio_pci.ko drivers/virtio/virtio_mmio.ko net/core/failover.ko \
	drivers/net/net_failover.ko drivers/net/virtio_net.ko; do
	src="$kroot/lib/modules/$kver/kernel/$m"
	if [ ! -f "$src" ]; then
		grep -q "/$(basename "$m")\$" "$kroot/lib/modules/$kver/modules.builtin" 2>/dev/null && continue
		log "kernel $kver has no module $m"; exit 1
	fi
	cp "$src" "$stage/lib/modules/"
	echo "/lib/modules/$(basename "$m")" >> "$stage/kici/modules.order"
done

cat > "$stage/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
printf 'root:x:0:\nnogroup:x:65534:\n' > "$stage/etc/group"
printf '127.0.0.1 localhost\n' > "$stage/etc/hosts"
printf 'kici job VM (%s)\n' "$kver" > "$stage/etc/issue"

(cd "$stage" && find . | LC_ALL=C sort | "$stage/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null) > "$out/initramfs.cpio.tmp"
mv "$out/initramfs.cpio.tmp" "$out/initramfs.cpio"
log "kernel $kver, initramfs $(du -h "$out/initramfs.cpio" | cut -f1) in $out"
echo "$out"
