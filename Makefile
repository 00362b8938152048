# drover: `make demo` runs the examples on a dev agent, `make test` runs every
# test. Both need Go (1.26) and the Go module proxy; tools the checks use are
# installed into .tools/ by the targets themselves, and programs the tests
# run (runc) from Debian's packages by scripts/test-deps.sh.

GO          ?= go
BIN         := bin/drover
TOOLS       := $(CURDIR)/.tools
STATICCHECK := $(TOOLS)/staticcheck

.PHONY: all build demo test deps lint unit race fuzz e2e bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/drover

demo: build
	./scripts/demo.sh

# test: formatting, vet, staticcheck, all tests (unit, API, real workers,
# real containers, end to end with the real binary), and the race detector
# on the packages with concurrency, then each fuzz target for a few
# seconds.
test: deps lint unit race fuzz

deps:
	./scripts/test-deps.sh

lint: $(STATICCHECK)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

unit:
	$(GO) test -count=1 ./...

# The server's own tests run httpapi, cluster (real gossip) and logstore
# under the detector through in-process clusters; their packages' unit
# tests are not worth a race build each.
race:
	$(GO) test -count=1 -race ./server/ ./server/state/ ./worker/ ./api/

# Each fuzz target runs FUZZTIME on top of its committed seed corpus
# (testdata/fuzz), which `go test` also runs as ordinary tests. The
# fuzzer first replays every input it knows to gather baseline coverage,
# inside FUZZTIME, and a deadline that falls in that phase fails the run;
# so the inputs earlier runs cached are dropped first (`go clean
# -fuzzcache`) and every run starts from the committed corpus, taking
# the same time however many runs came before.
FUZZTIME ?= 5s
FUZZ := ./jobspec/:FuzzParse ./server/state/:FuzzDecode ./server/httpapi/:FuzzRequestBodies
fuzz:
	$(GO) clean -fuzzcache
	@for t in $(FUZZ); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "$(GO) test -run '^$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) $$pkg"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

e2e:
	$(GO) test -count=1 -v ./e2e/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./scheduler/ ./server/... ./jobspec/

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

clean:
	rm -rf bin $(TOOLS)
