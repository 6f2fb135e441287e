#!/usr/bin/env bash
# Assembles the build context of the orchestrator image (deploy/image/Dockerfile)
# in OUT from the static binaries in BIN and the host's static busybox
# (Debian busybox-static), so that `docker build` pulls nothing.
#
#   deploy/image/rootfs.sh BIN OUT
#
# OUT/rootfs/ becomes the image's /: /usr/local/bin/kici-*, /bin/busybox and
# its applet links, /etc/passwd and /etc/group naming kici (10001) and
# kici-step (10002), /tmp (1777), CA certificates and zoneinfo when the host
# has them. OUT/data/ becomes /var/lib/kici, owned by kici.
set -euo pipefail

bin=${1:?usage: rootfs.sh BIN OUT}
out=${2:?usage: rootfs.sh BIN OUT}
busybox=${BUSYBOX:-/bin/busybox}

for b in kici-orchestrator kici-agent kici-step-supervisor kici-admin; do
  [ -x "$bin/$b" ] || { echo "rootfs.sh: $bin/$b missing: run make build" >&2; exit 1; }
  if file "$bin/$b" 2>/dev/null | grep -q 'dynamically linked'; then
    echo "rootfs.sh: $bin/$b is dynamically linked: build with CGO_ENABLED=0" >&2; exit 1
  fi
done
if [ ! -x "$busybox" ]; then
  echo "rootfs.sh: $busybox missing: apt-get install busybox-static (or make test-deps)" >&2
  exit 1
fi

rm -rf "$out"
root=$out/rootfs
mkdir -p "$root/usr/local/bin" "$root/bin" "$root/etc" "$root/tmp" "$out/data"
chmod 1777 "$root/tmp"
cp "$bin/kici-orchestrator" "$bin/kici-agent" "$bin/kici-step-supervisor" "$bin/kici-admin" "$root/usr/local/bin/"
cp "$busybox" "$root/bin/busybox"
for applet in sh ash cat cp date echo env grep head ls mkdir mv rm sed sleep sort tail tar test touch tr true false wc wget id hostname; do
  ln -s busybox "$root/bin/$applet"
done

cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
kici:x:10001:10001:kici orchestrator:/var/lib/kici:/sbin/nologin
kici-step:x:10002:10002:kici job steps:/nonexistent:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
PASSWD
cat > "$root/etc/group" <<'GROUP'
root:x:0:
kici:x:10001:
kici-step:x:10002:
nogroup:x:65534:
GROUP
echo "hosts: files dns" > "$root/etc/nsswitch.conf"

if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$root/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
fi
if [ -d /usr/share/zoneinfo ]; then
  mkdir -p "$root/usr/share"
  cp -a /usr/share/zoneinfo "$root/usr/share/"
  rm -rf "$root/usr/share/zoneinfo/right"
fi
# The data volume's mount point: COPY --chown gives it to kici; a kept file
# makes sure the directory itself is created by the copy.
touch "$out/data/.kici-data"
chmod 0700 "$out/data"
cp "$(dirname "$0")/Dockerfile" "$out/Dockerfile"
