#!/usr/bin/env bash
# Assembles the build context of the orchestrator image (deploy/image/Dockerfile)
# in OUT from the static binaries in BIN and the host's static busybox
# (Debian busybox-static), so that `docker build` pulls nothing. With the
# third argument `agent` it assembles the agent image's context instead
# (deploy/image-agent/Dockerfile): kici-agent and kici-step-supervisor only,
# the user kici-agent (10001), OUT/home/ for /home/kici and OUT/data/work/
# for the job work directories.
#
#   deploy/image/rootfs.sh BIN OUT [orchestrator|agent]
#
# OUT/rootfs/ becomes the image's /: /usr/local/bin/kici-*, /bin/busybox and
# its applet links, /etc/passwd and /etc/group naming kici (10001) and
# kici-step (10002), /tmp (1777), CA certificates and zoneinfo when the host
# has them. OUT/data/ becomes /var/lib/kici, owned by kici.
set -euo pipefail

bin=${1:?usage: rootfs.sh BIN OUT}
out=${2:?usage: rootfs.sh BIN OUT}
kind=${3:-orchestrator}
busybox=${BUSYBOX:-/bin/busybox}

case $kind in
  orchestrator) bins="kici-orchestrator kici-agent kici-step-supervisor kici-admin" ;;
  agent) bins="kici-agent kici-step-supervisor" ;;
  *) echo "rootfs.sh: unknown image kind $kind: want orchestrator or agent" >&2; exit 1 ;;
esac

for b in $bins; do
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
for b in $bins; do cp "$bin/$b" "$root/usr/local/bin/"; done
cp "$busybox" "$root/bin/busybox"
for applet in sh ash cat cp date echo env grep head ls mkdir mv rm sed sleep sort tail tar test touch tr true false wc wget id hostname; do
  ln -s busybox "$root/bin/$applet"
done

if [ "$kind" = agent ]; then
  cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
kici-agent:x:10001:10001:kici agent:/home/kici:/sbin/nologin
kici-step:x:10002:10002:kici job steps:/nonexistent:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
PASSWD
  cat > "$root/etc/group" <<'GROUP'
root:x:0:
kici-agent:x:10001:
kici-step:x:10002:
nogroup:x:65534:
GROUP
else
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
fi
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
if [ "$kind" = agent ]; then
  # /var/lib/kici-agent/work and /home/kici, the agent user's own (COPY
  # --chown); the work root is searchable by others (0711), for a step user
  # of a root agent, and kept files make the copies create the directories.
  mkdir -p "$out/data/work" "$out/home"
  touch "$out/data/work/.kici-work" "$out/home/.kici-home"
  chmod 0711 "$out/data" "$out/data/work"
  chmod 0755 "$out/home"
  cp "$(dirname "$0")/../image-agent/Dockerfile" "$out/Dockerfile"
  exit 0
fi
# The data volume's mount point: COPY --chown gives it to kici; a kept file
# makes sure the directory itself is created by the copy.
touch "$out/data/.kici-data"
chmod 0700 "$out/data"
cp "$(dirname "$0")/Dockerfile" "$out/Dockerfile"
