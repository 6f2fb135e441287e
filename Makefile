# kici — build, test and demo.
#   make demo   run a real workflow end to end on the embedded default
#   make test   vet + every test (unit, store conformance on SQLite and
#               PostgreSQL, end-to-end with the real binaries)

GO      ?= go
BIN     := bin
BINARIES := kici-orchestrator kici-agent kici-admin kici
VERSION ?= 0.2.0-dev
LDFLAGS := -s -w -X kici.dev/kici/internal/orchestrator.Version=$(VERSION)

.PHONY: all build demo test test-short test-race vet fmt-check lock-check clean

all: build

build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

demo: build
	@bash scripts/demo.sh

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lock-check: build
	$(BIN)/kici compile --check

test: build fmt-check vet lock-check
	$(GO) test -count=1 -timeout 14m ./...

test-race:
	$(GO) test -race -count=1 -timeout 20m ./...

clean:
	rm -rf $(BIN) .demo
