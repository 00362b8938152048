# drover: `make demo` runs the examples on a dev agent, `make test` runs every
# test. Both need Go (1.26) and the Go module proxy; tools the checks use are
# installed into .tools/ by the targets themselves, and programs the tests
# run (runc) from Debian's packages by scripts/test-deps.sh.

GO          ?= go
# The version every binary reports (drover version, status, list-peers,
# drover_build_info): the git description of the checkout.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/drover-sched/drover/version.Version=$(VERSION)
TOOLS       := $(CURDIR)/.tools
STATICCHECK := $(TOOLS)/staticcheck
TERRAFORM   := $(TOOLS)/terraform

.PHONY: all build demo test deps lint unit race fuzz e2e bench bench-history bench-ui screenshots clean

all: build

# drover, and drover-bench beside it (`drover bench` runs it; the
# harnesses the benchmarks are made of are never linked into drover).
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/drover ./cmd/drover-bench

demo: build
	./scripts/demo.sh

# test: formatting, vet, staticcheck, all tests (unit, API, real workers,
# real containers, end to end with the real binary), and the race detector
# on the packages with concurrency, then each fuzz target for a few
# seconds.
test: deps lint unit race fuzz

deps:
	./scripts/test-deps.sh

# screenshots: the web UI's browser test, saving its screenshots of every
# page into docs/screenshots (the README shows them).
screenshots: deps
	DROVER_SCREENSHOT_DIR=$(CURDIR)/docs/screenshots $(GO) test -count=1 -run '^TestWebUI$$' ./e2e/

lint: $(STATICCHECK)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# The end-to-end package alone takes 14 to 16 minutes on 2 cores, and 22
# to 25 with both cores busy with other work: past go test's default limit
# of 10 per package, so the limit is set for a loaded machine's run.
unit: $(TERRAFORM)
	$(GO) test -count=1 -timeout 40m ./...

# The server's own tests run httpapi, cluster (real gossip) and joblogs
# under the detector through in-process clusters; their packages' unit
# tests are not worth a race build each. The web UI's tests run its live
# streams and in-process API calls against a real server.
race:
	$(GO) test -count=1 -timeout 25m -race ./server/ ./server/state/ ./server/ui/ ./worker/ ./api/

# Each fuzz target runs a number of executions (about 5 s each here) on
# top of its committed seed corpus (testdata/fuzz), which `go test` also
# runs as ordinary tests. Counts, not durations: Go 1.26's fuzz
# coordinator can fail a duration-limited run with "context deadline
# exceeded" when the deadline lands while a worker is busy
# (golang/go#75804, fixed in Go 1.27); a count has no deadline. The
# inputs earlier runs cached are dropped first (`go clean -fuzzcache`),
# so every run replays the same baseline however many came before.
# `make fuzz FUZZTIME=10m` fuzzes each target for longer, by time.
FUZZ := ./jobspec/:FuzzParse:60000x ./jobspec/nomadspec/:FuzzTranslateJSON:20000x ./server/state/:FuzzDecode:100000x ./server/httpapi/:FuzzRequestBodies:10000x
fuzz:
	$(GO) clean -fuzzcache
	@for t in $(FUZZ); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${FUZZTIME:-$${rest#*:}}; \
	  echo "$(GO) test -run '^$$' -fuzz '^$$name\$$' -fuzztime $$budget $$pkg"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget $$pkg || exit 1; \
	done

e2e:
	$(GO) test -count=1 -v ./e2e/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./scheduler/ ./server/... ./jobspec/

# bench-history: export a complete batch of 1,000,000 jobs from the state
# into a real MariaDB (started for the run), then read pages of 50 of it.
bench-history: deps
	$(GO) test -run '^$$' -bench BenchmarkHistoryExport -benchtime 1x -timeout 30m ./server/

# bench-ui: the web UI's batches page over 10,000 batches and the page of a
# 1,000,000-job batch, 100 loads each (p50 and p99); and how long a change
# takes to reach 30 open live pages of a batch (p50 and p99).
bench-ui:
	$(GO) test -run '^$$' -bench 'BenchmarkUIPages|BenchmarkLivePages' -benchtime 1x -timeout 20m ./server/ui/

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Terraform 1.5.7 (the last MPL release) runs the provider's acceptance
# tests (terraform/provider) through dev_overrides.
$(TERRAFORM):
	GOBIN=$(TOOLS) $(GO) install github.com/hashicorp/terraform@v1.5.7

clean:
	rm -rf bin $(TOOLS)
