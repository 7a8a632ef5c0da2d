# Ironflow. `make dev` runs the whole system on this machine; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL := $(CURDIR)/bin/temporal
TEMPORAL_SERVER_VERSION := v1.29.1
TEMPORAL_SERVER := $(CURDIR)/bin/temporal-server
IRONFLOW := $(CURDIR)/bin/ironflow
CLI_REFERENCE_UPDATE := IRONFLOW_UPDATE_CLI_REFERENCE
# Integration tests find the Temporal dev server here.
export IRONFLOW_TEMPORAL_CLI := $(TEMPORAL)

.PHONY: all build image tools temporal-server test test-unit test-integration lint docs bench bench-moves fuzz dev dev-clean demo clean

all: build

build:
	$(GO) build -o $(IRONFLOW) ./cmd/ironflow

# Ironflow's discovery image, what unknown machines boot to enlist: bin/image/vmlinuz and
# bin/image/initrd.img, from Debian's kernel and busybox-static (fetched with apt-get download
# into the user's cache dir, nothing installed) and the static ironflow binary. Reproducible:
# the same inputs and SOURCE_DATE_EPOCH give the same SHA-256, printed with the sizes.
IMAGE_DIR := $(CURDIR)/bin/image
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(CURDIR)/bin/ironflow-static ./cmd/ironflow
	$(CURDIR)/bin/ironflow-static image build --out $(IMAGE_DIR) -o table

# The pinned Temporal CLI (dev server + web UI). About 4 minutes the first time.
tools: $(TEMPORAL)

$(TEMPORAL):
	@mkdir -p bin
	@echo "building the Temporal CLI $(TEMPORAL_CLI_VERSION) into ./bin (first time: about 4 minutes)..."
	@( while sleep 20; do echo "  ... still building the Temporal CLI"; done ) & ticker=$$!; \
	GOBIN=$(CURDIR)/bin GOFLAGS=-mod=mod $(GO) install \
		-ldflags "-X github.com/temporalio/cli/temporalcli.Version=$(TEMPORAL_CLI_VERSION:v%=%)" \
		github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION); \
	status=$$?; kill $$ticker; exit $$status

test: tools lint
	$(GO) test -count=1 -timeout 15m ./...

test-unit:
	$(GO) test -count=1 -short ./...

test-integration: tools
	$(GO) test -count=1 -timeout 15m ./integration/...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@# go.mod lists exactly what the code imports, direct dependencies not marked indirect.
	$(GO) mod tidy -diff
	@# docs/cli is what the cobra commands generate (`make docs` regenerates it).
	$(GO) test -count=1 -run '^TestCLIReferenceIsCurrent$$' ./cmd/ironflow/

# Regenerates the CLI reference docs/cli from the cobra commands.
docs:
	$(CLI_REFERENCE_UPDATE)=1 $(GO) test -count=1 -run '^TestCLIReferenceIsCurrent$$' ./cmd/ironflow/

# The DHCP server and TFTP; a rack's config poll on the region; Ironflow's DHCP against Kea
# under perfdhcp (skipped, saying so, without perfdhcp and kea-dhcp4 or without root).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s -cpu 1 ./rack/dhcp/ ./rack/tftp/ ./rack/dns/
	$(GO) test -run '^$$' -bench RackConfig -benchtime 200x -cpu 1 ./region/store/ ./region/server/
	./scripts/bench-dhcp-vs-kea.sh

# Moves at scale on the dev stack (not part of `make test`): a rack transfer and a bulk migration
# of N machines each, verified, with wall time, Temporal writes and CPU per machine, on the
# Temporal dev server and on the Temporal server on PostgreSQL. Sizes: IRONFLOW_BENCH_MOVES_N
# (default 24,200,1000); engines: IRONFLOW_BENCH_MOVES_ENGINES (default dev,postgres);
# docs/benchmarks.md "Moves at scale" has the figures.
bench-moves: tools temporal-server
	IRONFLOW_TEMPORAL_SERVER=$(TEMPORAL_SERVER) $(GO) run ./dev/benchmoves

# The Temporal server and its SQL tool, at the version the pinned CLI embeds (`go version -m
# bin/temporal`), for bench-moves' engine on PostgreSQL (dev/temporalpg). Built from the server's
# own module, so the main module's pinned versions stay as they are. 5–15 minutes the first time.
temporal-server: $(TEMPORAL_SERVER)

$(TEMPORAL_SERVER):
	@mkdir -p $(dir $(TEMPORAL_SERVER))
	@echo "building the Temporal server $(TEMPORAL_SERVER_VERSION) and temporal-sql-tool into $(dir $(TEMPORAL_SERVER)) (first time: 5–15 minutes)..."
	@tmp=$$(mktemp -d) && \
	GOBIN=$$tmp GOFLAGS=-mod=mod $(GO) install \
		go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION) \
		go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION) && \
	mv $$tmp/sql $(dir $(TEMPORAL_SERVER))temporal-sql-tool && mv $$tmp/server $(TEMPORAL_SERVER); \
	status=$$?; rm -rf $$tmp; exit $$status

# Bounded fuzzing of the packet and path parsers, and of the region's request decoding,
# keys and filters.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzHandle -fuzztime 30s ./rack/dhcp/
	$(GO) test -run '^$$' -fuzz FuzzResolve -fuzztime 30s ./rack/bootfs/
	$(GO) test -run '^$$' -fuzz FuzzHandle -fuzztime 30s ./rack/dns/
	$(GO) test -run '^$$' -fuzz FuzzEnlistScript -fuzztime 20s ./rack/httpboot/
	$(GO) test -run '^$$' -fuzz FuzzDecodeObject -fuzztime 20s ./region/server/
	$(GO) test -run '^$$' -fuzz FuzzListQuery -fuzztime 20s ./region/server/
	$(GO) test -run '^$$' -fuzz FuzzParseKey -fuzztime 20s ./region/store/
	$(GO) test -run '^$$' -fuzz FuzzParseFilter -fuzztime 20s ./region/store/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 20s ./internal/syslogmsg/

# The racks serve the discovery image `make image` built (from its cache when nothing changed);
# where it cannot be built (no apt-get or dpkg-deb) the stack starts without it.
dev: build tools
	@$(MAKE) --no-print-directory image || echo "make dev: no discovery image (make image needs apt-get and dpkg-deb): unknown machines cannot boot discovery/"
	IRONFLOW_DEV_DISCOVERY_IMAGE=$$([ -f $(IMAGE_DIR)/initrd.img ] && echo $(IMAGE_DIR)) $(IRONFLOW) dev

# Removes the stopped dev stack's state dir and everything in it (PostgreSQL's data too).
dev-clean: build
	$(IRONFLOW) dev --teardown

demo: build tools
	$(IRONFLOW) dev --demo

clean:
	rm -rf bin
