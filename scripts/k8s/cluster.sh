#!/usr/bin/env bash
# cluster.sh — a real one-node Kubernetes cluster on this machine, for the
# Kubernetes tests (make test-k8s; docs/kubernetes.md, "Running kici's
# Kubernetes tests on one machine").
#
#   scripts/k8s/cluster.sh up       start (or reuse) etcd, kube-apiserver,
#                                   kube-controller-manager, kube-scheduler,
#                                   a containerd of its own, and a kubelet
#   scripts/k8s/cluster.sh down     stop all of it, kill the pods' containers,
#                                   unmount their volumes, forget the pods
#   scripts/k8s/cluster.sh status   which components run, and the node's state
#   scripts/k8s/cluster.sh import IMAGE...  copy Docker images into the node
#
# Everything lives under $KICI_K8S_CACHE/run (default /var/cache/kici-k8s/run):
# pki/ (a CA and the certificates of every component, made with openssl
# once and kept across down/up), admin.kubeconfig (cluster-admin; written as
# soon as the API server is ready, so tests can wait on the file), logs/
# (one file a component), etcd/, containerd/ (root, state and socket: a
# separate instance, never Docker's), kubelet/, cni/.
#
# The binaries come from scripts/k8s/build.sh. Needs root (a kubelet).
set -euo pipefail

cache=${KICI_K8S_CACHE:-/var/cache/kici-k8s}
run=$cache/run
bin=$cache/bin
pki=$run/pki
logs=$run/logs
pids=$run/pids
node=${KICI_K8S_NODE:-kici-node}
apiport=${KICI_K8S_API_PORT:-6443}
etcdport=${KICI_K8S_ETCD_PORT:-2479}
podcidr=${KICI_K8S_POD_CIDR:-10.88.0.0/16}
servicecidr=${KICI_K8S_SERVICE_CIDR:-10.96.0.0/16}
serviceip=${KICI_K8S_SERVICE_IP:-10.96.0.1} # the first address of servicecidr: the kubernetes Service
bridge=kici-cni0
sock=$run/containerd/containerd.sock
pause_image=kici.local/pause:1
busybox_image=kici.local/busybox:1

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

# hostip is the address other machines (and the pods) reach this one at.
hostip() {
	ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1
}

# update writes its standard input to file $1 only when that changes it: a
# running kube-proxy exits when its configuration file is rewritten, even
# with the same content.
update() {
	local tmp=$1.new
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then
		rm -f "$tmp"
	else
		mv "$tmp" "$1"
	fi
}

alive() {
	local f=$pids/$1.pid
	[ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

# start runs a component in the background in its own session, its output
# in logs/NAME.log, its pid in pids/NAME.pid; a running one is kept.
start() {
	local name=$1
	shift
	if alive "$name"; then
		return 0
	fi
	setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null &
	echo $! >"$pids/$name.pid"
}

# waitfor polls a command until it succeeds, up to $2 seconds, and names
# the log to read when it does not.
waitfor() {
	local what=$1 secs=$2 log=$3
	shift 3
	local i
	for ((i = 0; i < secs * 2; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	echo "cluster.sh: $what did not come up in ${secs}s; the end of $log:" >&2
	tail -n 30 "$log" >&2
	exit 1
}

# cert NAME CN ORG KIND [SAN]: a key and a certificate signed by the
# cluster's CA; KIND is client, server or both.
cert() {
	local name=$1 cn=$2 org=$3 kind=$4 san=${5:-}
	[ -f "$pki/$name.crt" ] && return 0
	local subj="/CN=$cn"
	[ -n "$org" ] && subj="/O=$org$subj"
	local ext=$pki/$name.ext usage
	case $kind in
	client) usage=clientAuth ;;
	server) usage=serverAuth ;;
	both) usage=serverAuth,clientAuth ;;
	esac
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$usage"
		[ -n "$san" ] && echo "subjectAltName=$san"
	} >"$ext"
	openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
	openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
	openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 3650 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
	rm -f "$pki/$name.csr" "$ext"
}

certificates() {
	local ip=$1
	mkdir -p "$pki"
	chmod 0700 "$pki"
	if [ ! -f "$pki/ca.crt" ]; then
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" \
			-days 3650 -subj "/CN=kici-k8s-ca" 2>/dev/null
	fi
	# The API server is reached at 127.0.0.1 from this machine, at the
	# host's address from the pods, and at the kubernetes Service by name.
	cert apiserver kube-apiserver "" server \
		"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$ip,IP:$serviceip"
	# Every user below is named by its certificate: the RBAC bootstrap
	# policy grants system:masters, system:kube-controller-manager,
	# system:kube-scheduler and (with the Node authorizer) system:node:NAME.
	cert admin kici-admin system:masters client
	cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters client
	cert controller-manager system:kube-controller-manager "" client
	cert scheduler system:kube-scheduler "" client
	cert kubelet "system:node:$node" system:nodes client
	cert kube-proxy system:kube-proxy "" client
	cert kubelet-serving "$node" "" server "DNS:$node,DNS:localhost,IP:127.0.0.1,IP:$ip"
	if [ ! -f "$pki/sa.key" ]; then
		openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
		openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
	fi
}

# kubeconfig NAME CERT SERVER: a kubeconfig authenticating with CERT's key
# pair (embedded, so the file can be copied elsewhere).
kubeconfig() {
	local out=$1 c=$2 server=$3
	local tmp=$out.tmp
	cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kici-k8s
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
users:
- name: $c
  user:
    client-certificate-data: $(base64 -w0 <"$pki/$c.crt")
    client-key-data: $(base64 -w0 <"$pki/$c.key")
contexts:
- name: kici-k8s
  context:
    cluster: kici-k8s
    user: $c
current-context: kici-k8s
EOF
	chmod 0600 "$tmp"
	mv "$tmp" "$out"
}

api() {
	curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://127.0.0.1:$apiport$1"
}

containerd_config() {
	mkdir -p "$run/containerd" "$run/cni/net.d" "$run/cni/ipam"
	update "$run/containerd/config.toml" <<EOF
# A containerd of the Kubernetes test node's own: its own root, state and
# sockets, so Docker's containerd is never touched (scripts/k8s/cluster.sh).
version = 2
root = "$run/containerd/root"
state = "$run/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[debug]
  address = "$run/containerd/debug.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "$run/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  disable_apparmor = true
  # This machine's root lacks CAP_SYS_RESOURCE (a sandbox of a VM), so no
  # process may lower an oom_score_adj; the kubelet asks -998 for every
  # pod sandbox and runc fails ("failed to update /proc/self/oom_score_adj:
  # Permission denied"). Restricted, containerd clamps the request to its
  # own score instead.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      # cgroup v1 here: cgroupfs, as the kubelet's cgroupDriver.
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$run/cni/net.d"
EOF
	# One bridge for the pods, NAT to the outside; the firewall plugin
	# accepts the pods' traffic in FORWARD, which Docker's rules drop by
	# default.
	update "$run/cni/net.d/10-kici.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kici-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$run/cni/ipam",
        "ranges": [[{"subnet": "$podcidr"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "firewall"},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

kubelet_config() {
	local ip=$1
	mkdir -p "$run/kubelet"
	update "$run/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only; the kubelet refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$sock
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $pki/ca.crt
authorization:
  mode: Webhook
failSwapOn: false
staticPodPath: ""
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# No registry is reachable: every image is imported, none is pulled, and
# none may be collected.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
EOF
}

# kube_proxy_config: iptables mode, which makes the Services' ClusterIPs
# (the kubernetes Service that in-cluster clients dial among them) reach
# their pods. The conntrack table is left as the host has it.
kube_proxy_config() {
	update "$run/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $run/kube-proxy.kubeconfig
hostnameOverride: $node
mode: iptables
clusterCIDR: $podcidr
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
EOF
}

up() {
	[ "$(id -u)" = 0 ] || die "needs root (the kubelet and containerd)"
	local c
	for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		[ -x "$bin/$c" ] || die "$bin/$c missing: run scripts/k8s/build.sh"
	done
	for c in etcd containerd runc openssl curl; do
		command -v "$c" >/dev/null || die "$c missing: run scripts/k8s/build.sh (it installs the Debian packages)"
	done
	local ip
	ip=$(hostip)
	[ -n "$ip" ] || die "no primary IPv4 address (ip -4 route get 1.1.1.1 names none)"
	mkdir -p "$logs" "$pids"
	certificates "$ip"
	kubeconfig "$run/controller-manager.kubeconfig" controller-manager "https://127.0.0.1:$apiport"
	kubeconfig "$run/scheduler.kubeconfig" scheduler "https://127.0.0.1:$apiport"
	kubeconfig "$run/kubelet.kubeconfig" kubelet "https://127.0.0.1:$apiport"
	kubeconfig "$run/kube-proxy.kubeconfig" kube-proxy "https://127.0.0.1:$apiport"

	start etcd etcd --name kici-k8s --data-dir "$run/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcdport" --advertise-client-urls "http://127.0.0.1:$etcdport" \
		--listen-peer-urls "http://127.0.0.1:$((etcdport + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcdport + 1))" \
		--initial-cluster "kici-k8s=http://127.0.0.1:$((etcdport + 1))" --quota-backend-bytes 2147483648
	waitfor etcd 30 "$logs/etcd.log" curl -fsS "http://127.0.0.1:$etcdport/health"

	start kube-apiserver "$bin/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$etcdport" \
		--bind-address 0.0.0.0 --secure-port "$apiport" --advertise-address "$ip" \
		--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
		--client-ca-file "$pki/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--service-cluster-ip-range "$servicecidr" --allow-privileged=true \
		--kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP,Hostname
	waitfor kube-apiserver 120 "$logs/kube-apiserver.log" api /readyz
	# Other tests wait on this file: written only once the API answers.
	kubeconfig "$run/admin.kubeconfig" admin "https://127.0.0.1:$apiport"
	kubeconfig "$run/admin-hostip.kubeconfig" admin "https://$ip:$apiport"

	start kube-controller-manager "$bin/kube-controller-manager" \
		--kubeconfig "$run/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$run/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$run/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false \
		--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
		--use-service-account-credentials=true \
		--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
		--service-cluster-ip-range "$servicecidr"
	start kube-scheduler "$bin/kube-scheduler" \
		--kubeconfig "$run/scheduler.kubeconfig" \
		--authentication-kubeconfig "$run/scheduler.kubeconfig" \
		--authorization-kubeconfig "$run/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false

	containerd_config
	start containerd containerd --config "$run/containerd/config.toml"
	waitfor containerd 30 "$logs/containerd.log" ctr -a "$sock" version
	images

	kubelet_config "$ip"
	start kubelet "$bin/kubelet" --config "$run/kubelet/config.yaml" \
		--kubeconfig "$run/kubelet.kubeconfig" --root-dir "$run/kubelet/root" \
		--hostname-override "$node" --node-ip "$ip" --v 1
	waitfor "the node $node (Ready)" 120 "$logs/kubelet.log" node_ready

	if [ -x "$bin/kube-proxy" ]; then
		kube_proxy_config
		start kube-proxy "$bin/kube-proxy" --config "$run/kube-proxy.yaml"
		waitfor kube-proxy 60 "$logs/kube-proxy.log" curl -fsS http://127.0.0.1:10256/healthz
	else
		echo "cluster.sh: no $bin/kube-proxy: Services' ClusterIPs will not reach their pods (scripts/k8s/build.sh builds it)" >&2
	fi
	echo "cluster.sh: up; KICI_TEST_KUBECONFIG=$run/admin.kubeconfig" >&2
}

node_ready() {
	api "/api/v1/nodes/$node" | grep -A3 '"type": "Ready"' | grep -q '"status": "True"'
}

# images builds (once) and imports the images every pod needs here: the
# pod sandbox ("pause") and a busybox for tests, both FROM scratch with
# Debian's static busybox, so nothing is pulled.
images() {
	local have
	have=$(ctr -a "$sock" -n k8s.io images ls -q)
	if ! grep -qx "$pause_image" <<<"$have" || ! grep -qx "$busybox_image" <<<"$have"; then
		[ -x /bin/busybox ] || die "/bin/busybox missing: apt-get install busybox-static"
		command -v docker >/dev/null || die "docker missing: the test images are built with it"
		local ctx
		ctx=$(mktemp -d)
		mkdir -p "$ctx/bin" "$ctx/tmp"
		cp /bin/busybox "$ctx/bin/busybox"
		for a in sh sleep cat echo ls env id hostname true false wget date; do
			ln -s busybox "$ctx/bin/$a"
		done
		# The sandbox's one process only holds the pod's namespaces; it
		# exits on SIGTERM and SIGINT like Kubernetes' own pause.
		cat >"$ctx/Dockerfile.pause" <<'EOF'
FROM scratch
COPY bin/ /bin/
ENTRYPOINT ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 2147483647 & wait $!; done"]
EOF
		cat >"$ctx/Dockerfile.busybox" <<'EOF'
FROM scratch
COPY bin/ /bin/
COPY tmp/ /tmp/
ENV PATH=/bin
CMD ["/bin/sh"]
EOF
		chmod 1777 "$ctx/tmp"
		docker build -q -f "$ctx/Dockerfile.pause" -t "$pause_image" "$ctx" >>"$logs/images.log" 2>&1 || die "docker build of $pause_image failed: $logs/images.log"
		docker build -q -f "$ctx/Dockerfile.busybox" -t "$busybox_image" "$ctx" >>"$logs/images.log" 2>&1 || die "docker build of $busybox_image failed: $logs/images.log"
		rm -rf "$ctx"
		import "$pause_image" "$busybox_image"
	fi
}

# import copies Docker images into the node's containerd, where the kubelet
# finds them (imagePullPolicy IfNotPresent or Never: nothing is pulled).
import() {
	[ $# -gt 0 ] || die "usage: cluster.sh import IMAGE..."
	docker save "$@" | ctr -a "$sock" -n k8s.io images import --all-platforms - >/dev/null
}

stop() {
	local name=$1 f=$pids/$1.pid pid i
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 40; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.25
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

down() {
	stop kube-proxy
	# Its iptables chains (KUBE-*) outlive it; --cleanup removes them.
	[ -x "$bin/kube-proxy" ] && "$bin/kube-proxy" --cleanup >>"$logs/kube-proxy.log" 2>&1 || true
	stop kubelet
	# Every process of every pod is in the kubelet's kubepods cgroup: kill
	# those, then the shims of this containerd (named by its socket), then
	# remove the pods' cgroups so the next kubelet starts clean.
	local p d
	for p in $(find /sys/fs/cgroup/pids/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null || true); do
		kill -KILL "$p" 2>/dev/null || true
	done
	for p in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $sock" || true); do
		kill -KILL "$p" 2>/dev/null || true
	done
	for d in /sys/fs/cgroup/*/kubepods; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	stop containerd
	stop kube-scheduler
	stop kube-controller-manager
	stop kube-apiserver
	stop etcd
	# Volumes, rootfs and network namespaces the pods left mounted, deepest
	# first.
	local m
	for m in $(awk -v r="$run/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	for m in $(awk '$2 ~ /^\/run\/netns\/cni-/ {print $2}' /proc/mounts); do
		umount "$m" 2>/dev/null && rm -f "$m"
	done
	ip link delete "$bridge" 2>/dev/null || true
	# The pods are forgotten with the store: the next up starts empty (the
	# certificates and the imported images are kept).
	rm -rf "$run/etcd" "$run/kubelet/root" "$run/cni/ipam" "$run/containerd/state"
	rm -f "$run/admin.kubeconfig" "$run/admin-hostip.kubeconfig"
	echo "cluster.sh: down" >&2
}

status() {
	local c rc=0 all=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet)
	[ -x "$bin/kube-proxy" ] && all+=(kube-proxy)
	for c in "${all[@]}"; do
		if alive "$c"; then
			echo "$c: running (pid $(cat "$pids/$c.pid"))"
		else
			echo "$c: stopped"
			rc=1
		fi
	done
	if [ -f "$run/admin.kubeconfig" ] && node_ready; then
		echo "node $node: Ready"
	else
		echo "node $node: not ready"
		rc=1
	fi
	return $rc
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
import)
	shift
	import "$@"
	;;
*) die "usage: cluster.sh up|down|status|import IMAGE..." ;;
esac
