# kici — build, test and demo.
#   make demo   run a real workflow end to end on the embedded default
#   make test   vet, lint + every test (unit, store conformance on SQLite and
#               PostgreSQL, end-to-end with the real binaries)
#   make lint   golangci-lint with .golangci.yml (scripts/golangci-lint.sh installs it)
#   make image  the orchestrator container image (docs/deploy.md)
#   make agent-image  the agent image of the kubernetes scaler's pods (docs/deploy.md)
#   make install  binaries, systemd units and example env files under DESTDIR/PREFIX
#   make test-ha  the high-availability acceptance tests at full size
#   make acceptance  every pipeline of the corpus (testdata/pipelines) end to end
#   make test-k8s  the Kubernetes tests (build tag k8s) on a real one-node
#               cluster this machine runs (scripts/k8s; docs/kubernetes.md)

GO      ?= go
BIN     := bin
BINARIES := kici-orchestrator kici-agent kici-step-supervisor kici-admin kici kici-vm-init
VERSION ?= 0.2.0-dev
LDFLAGS := -s -w -X main.version=$(VERSION) $(foreach p,orchestrator agent,-X kici.dev/kici/internal/$(p).Version=$(VERSION))

.PHONY: all build demo screenshots test test-deps test-short test-race test-scaler test-chaos vet lint fmt-check lock-check clean fuzz

all: build

# bench: start the real binaries and print the figures of docs/performance.md (and the hot-path Go benchmarks)
.PHONY: bench
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2s ./internal/provider/github ./internal/ingest ./internal/dispatch ./internal/agent/logstream ./internal/logstore
	$(GO) test -run '^$$' -bench . -benchtime 20x ./internal/web
	$(GO) run ./cmd/kici-bench -bin $(BIN) $(BENCHFLAGS)

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

demo: build
	@bash scripts/demo.sh

# screenshots: PNGs of the web UI's main pages from a seeded demo run, into docs/img/ (needs chromium).
screenshots: build
	$(GO) run ./scripts/screenshots -bin $(BIN) -out docs/img

vet:
	$(GO) vet ./...

# lint: golangci-lint with the checks of .golangci.yml; scripts/golangci-lint.sh
# installs the pinned release once into the test-tool cache and prints its path.
lint:
	@bin=$$(bash scripts/golangci-lint.sh) && echo "golangci-lint run ./..." && "$$bin" run ./...

fmt-check:
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lock-check: build
	$(BIN)/kici compile --check

# test-deps: install the Debian packages the tests need when missing (scripts/test-deps.sh).
test-deps:
	@bash scripts/test-deps.sh

test: test-deps
	@$(MAKE) --no-print-directory test-run

.PHONY: test-run e2e-durations
# The timeout is per test binary; it only stops a hung test. Every package but
# ./e2e runs first; then ./e2e, by far the longest (about 15 min serially on 2
# idle cores, mostly waiting on the processes it starts), runs as E2E_SHARDS
# concurrent processes of one test binary, split by the durations in
# e2e/testdata/durations.txt (scripts/e2eshard). The lint (what make lint
# runs; spelled out, not a sub-make, so make -n stays a dry run) runs in the
# background beside the unit tests (a few seconds once its cache is warm;
# the first run on a machine installs golangci-lint there, a few minutes
# hidden behind the tests); its output is shown when they end and its
# failure fails the target.
E2E_SHARDS ?= 2
test-run: build fmt-check vet lock-check
	@lintlog=$$(mktemp); \
	{ bin=$$(bash scripts/golangci-lint.sh) && "$$bin" run ./...; } >"$$lintlog" 2>&1 & lintpid=$$!; \
	echo "$(GO) test -count=1 -timeout 20m \$$($(GO) list ./... | grep -v '/e2e\$$')"; \
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/e2e$$'); tests=$$?; \
	wait $$lintpid; lint=$$?; \
	cat "$$lintlog"; rm -f "$$lintlog"; \
	if [ $$lint -ne 0 ]; then echo "golangci-lint failed (exit $$lint; make lint runs it alone)" >&2; fi; \
	[ $$tests -eq 0 ] && [ $$lint -eq 0 ]
	$(GO) run ./scripts/e2eshard -shards $(E2E_SHARDS) -timeout 20m

# test-vm: only the test of jobs in real QEMU virtual machines (the qemu
# scaler; make test runs it too), with the guest image scripts/vm-image.sh
# builds from Debian's kernel; needs root.
.PHONY: test-vm vm-image
test-vm: build test-deps
	$(GO) test -count=1 -timeout 20m -run 'TestVM' -v ./e2e

# vm-image: the qemu scaler's guest kernel and initramfs into /var/cache/kici-vm.
vm-image: build
	bash scripts/vm-image.sh

# e2e-durations: run ./e2e sharded and rewrite e2e/testdata/durations.txt
# with what each test took, so the shards stay balanced as tests change.
e2e-durations: build
	$(GO) run ./scripts/e2eshard -shards $(E2E_SHARDS) -timeout 20m -record

# fuzz: explore each fuzz target for FUZZTIME (make test runs their seed corpora).
# FUZZMINIMIZE bounds the minimization of each new interesting input: go
# test's default (60 s) spends whole runs minimizing multi-KB inputs such as
# lock files, one exec at a time, and finds nothing new meanwhile. The first
# run compiles every dependency with coverage instrumentation (SQLite's takes
# minutes); later runs reuse the build cache.
FUZZTIME ?= 60s
FUZZMINIMIZE ?= 500x
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE)
fuzz:
	$(FUZZ) ./internal/lockfile -fuzz '^FuzzParse$$'
	$(FUZZ) ./internal/provider/github -fuzz '^FuzzNormalize$$'
	$(FUZZ) ./internal/provider/universal -fuzz '^FuzzNormalize$$'
	$(FUZZ) ./internal/trigger -fuzz '^FuzzJSONPathFilter$$'
	$(FUZZ) ./internal/protocol -fuzz '^FuzzDecode$$'
	$(FUZZ) ./internal/webhook -fuzz '^FuzzGenericWebhook$$'

# test-scaler: the scaler's tests repeated under the race detector, plus its end-to-end tests five times (bare-metal caps, Docker, deadline, warm pool, settings).
test-scaler: build
	$(GO) test -race -count=10 ./internal/scaler ./internal/cluster && $(GO) test -count=5 -timeout 30m -run 'TestScaler|TestClusterSettings' ./e2e

# test-chaos: the kill -9, restart, stall, cancel and concurrency acceptance tests (docs/runs-control.md) repeated ten times.
test-chaos: build
	$(GO) test -count=10 -timeout 40m -run 'TestOrchestratorKillNine|TestKillNine|TestStaticAgent|TestStalledAgent|TestGracefulCancel|TestConcurrencyGroup|TestAgentSIGUSR1' ./e2e

# test-logs-long: a step prints 1,000,000 lines through a real agent; every
# line must be stored in order. Prints "log throughput: … lines/s end to end".
LOG_LINES ?= 1000000
test-logs-long: build
	KICI_TEST_LOG_LINES=$(LOG_LINES) $(GO) test -count=1 -timeout 15m -v -run '^TestLogLinesAllStoredInOrder$$' ./e2e | grep -E 'log throughput|^(--- |ok|FAIL)'

test-race:
	$(GO) test -race -count=1 -timeout 20m ./...

# image: the orchestrator container image, FROM scratch with the static
# binaries of `make build`, a static busybox and a non-root user (no registry
# is contacted). deploy/image/Dockerfile; docs/deploy.md.
IMAGE ?= kici-orchestrator:$(VERSION)
REVISION ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
.PHONY: image
image: build
	bash deploy/image/rootfs.sh $(BIN) $(BIN)/image
	docker build -q -t $(IMAGE) --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) $(BIN)/image

# agent-image: the agent image the kubernetes scaler's job pods run (or copy
# kici-agent from, for a job with `container:`): FROM scratch with kici-agent,
# kici-step-supervisor and a static busybox, as the non-root user kici-agent.
# deploy/image-agent/Dockerfile; docs/deploy.md.
AGENT_IMAGE ?= kici-agent:$(VERSION)
.PHONY: agent-image
agent-image: build
	bash deploy/image/rootfs.sh $(BIN) $(BIN)/image-agent agent
	docker build -q -t $(AGENT_IMAGE) --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) $(BIN)/image-agent

# install: the binaries, the systemd units of the orchestrator and of a
# static agent, their sysusers.d entry, example environment files (never
# over existing ones) and the deployment docs. Starts nothing and creates no
# user: docs/deploy.md says what to run next. PREFIX and DESTDIR as usual;
# the units name $(PREFIX)/bin.
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DOCDIR ?= $(PREFIX)/share/doc/kici
.PHONY: install
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(DOCDIR)
	install -d -m 0750 $(DESTDIR)$(SYSCONFDIR)/kici
	install -m 0755 $(addprefix $(BIN)/,$(BINARIES)) $(DESTDIR)$(PREFIX)/bin/
	for u in kici-orchestrator.service kici-agent.service; do \
		sed 's|@BINDIR@|$(PREFIX)/bin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g; s|@DOCDIR@|$(DOCDIR)|g' deploy/systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	install -m 0644 deploy/systemd/kici.sysusers $(DESTDIR)$(SYSUSERSDIR)/kici.conf
	install -m 0644 docs/deploy.md docs/high-availability.md docs/configuration.md $(DESTDIR)$(DOCDIR)/
	for e in orchestrator.env agent.env; do \
		test -e $(DESTDIR)$(SYSCONFDIR)/kici/$$e || install -m 0600 deploy/systemd/$$e.example $(DESTDIR)$(SYSCONFDIR)/kici/$$e || exit 1; \
	done

# test-ha: the high-availability acceptance tests (docs/high-availability.md)
# at full size: 100 webhooks across three orchestrators, the rolling restart
# and the kill -9 failover, plus the three orchestrators as containers with
# one cut off its network, and the rolling upgrade from the previous
# release's binaries (docs/upgrade.md) under more load (build tag ha).
HA_WEBHOOKS ?= 100
.PHONY: test-ha
test-ha: build test-deps
	KICI_TEST_HA_WEBHOOKS=$(HA_WEBHOOKS) $(GO) test -tags ha -count=1 -timeout 40m -v -run '^(TestHA|TestUpgradeRolling)' ./e2e

# acceptance: every pipeline of the corpus (testdata/pipelines/README.md)
# end to end on the real orchestrator and agents and through `kici run
# local`; `make test` runs only the pipelines marked short. About 7
# minutes on two shared cores (testdata/pipelines/README.md).
.PHONY: acceptance
acceptance: build test-deps
	KICI_ACCEPTANCE=1 $(GO) test -count=1 -timeout 40m -v -run '^(TestPipelines|TestPipelineCorpusIsValid)$$' ./e2e

clean:
	rm -rf $(BIN) .demo

# test-k8s: the Kubernetes tests (build tag k8s; never part of make test)
# against a real cluster on this machine: scripts/k8s/build.sh builds
# kube-apiserver, kube-controller-manager, kube-scheduler and kubelet from
# k8s.io/kubernetes once (cached under /var/cache/kici-k8s) and installs
# etcd, containerd, runc and the CNI plugins from Debian;
# scripts/k8s/cluster.sh up starts (or reuses) the control plane and one
# node, and the orchestrator image (with kici-agent) is imported into the
# node, since no registry is reachable. Then every package with k8s-tagged
# tests runs with KICI_TEST_KUBECONFIG set; in ./e2e only the tests named
# TestK8s… or TestKubernetes… run (the rest of ./e2e is make test's).
# scripts/k8s/cluster.sh down stops the cluster; make test-k8s leaves it up
# for the next run. Needs root. docs/kubernetes.md.
K8S_RUN ?= /var/cache/kici-k8s/run
K8S_E2E_TESTS ?= ^Test(K8s|Kubernetes)
.PHONY: test-k8s
test-k8s: image
	bash scripts/k8s/build.sh >/dev/null
	bash scripts/helm.sh >/dev/null
	bash scripts/k8s/cluster.sh up
	bash scripts/k8s/cluster.sh import $(IMAGE)
	@pkgs=$$(grep -rlE --include='*_test.go' '^//go:build .*\bk8s\b' cmd internal e2e 2>/dev/null | xargs -r -n1 dirname | sort -u | grep -v '^e2e$$' | sed 's|^|./|'); \
	export KICI_TEST_KUBECONFIG=$(K8S_RUN)/admin.kubeconfig KICI_TEST_K8S_IMAGE=$(IMAGE); \
	if [ -n "$$pkgs" ]; then echo "$(GO) test -tags k8s -count=1 -timeout 40m $$pkgs"; $(GO) test -tags k8s -count=1 -timeout 40m $$pkgs || exit 1; fi; \
	echo "$(GO) test -tags k8s -count=1 -timeout 40m -v -run '$(K8S_E2E_TESTS)' ./e2e"; \
	$(GO) test -tags k8s -count=1 -timeout 40m -v -run '$(K8S_E2E_TESTS)' ./e2e
