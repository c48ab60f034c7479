# Two entry points for a fresh machine (see README.md):
#   make example   build the tools, build the example with probes, list them
#                  with bpftrace and trace one run
#   make test      every check CI runs
# Both first run scripts/setup.sh (make setup): it installs the tracers
# when missing and mounts tracefs.
GO          ?= go
BIN         := $(CURDIR)/bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 30s

.PHONY: all setup tools example test vet lint unit fuzz generate-check clean

all: tools

setup:
	scripts/setup.sh

tools:
	$(GO) build -o $(BIN)/ ./cmd/usdtgen ./cmd/usdt-toolexec

example: setup tools
	cd examples/provider && PATH=$(BIN):$$PATH $(GO) generate
	cd examples/provider && CGO_ENABLED=0 $(GO) build -toolexec=$(BIN)/usdt-toolexec -o $(BIN)/jobs .
	$(BIN)/usdt-toolexec list $(BIN)/jobs
	bpftrace -l 'usdt:$(BIN)/jobs:*'
	cd $(BIN) && bpftrace $(CURDIR)/examples/provider/latency.bt -c './jobs -jobs 200 -every 1ms'
	cd examples/toolexec && CGO_ENABLED=0 $(GO) build -toolexec="$(BIN)/usdt-toolexec -v -rules rules.yml" -o $(BIN)/cache .
	bpftrace -l 'usdt:$(BIN)/cache:*'
	$(BIN)/usdt-toolexec bt $(BIN)/cache > $(BIN)/cache.bt
	bpftrace $(BIN)/cache.bt -c '$(BIN)/cache -ops 2000'

test: setup vet lint generate-check unit fuzz

# gofmt's list is printed by echo, not through tee /dev/stderr: with
# stderr redirected to a file, opening /dev/stderr truncates the log so far.
vet:
	@files="$$(gofmt -l .)"; test -z "$$files" || { echo "$$files"; echo "gofmt needed on the files above"; exit 1; }
	$(GO) vet ./...

lint:
	$(GO) run $(STATICCHECK) ./...

# The committed generated files must be what usdtgen makes now.
generate-check: tools
	PATH=$(BIN):$$PATH $(GO) generate ./...
	@git diff --exit-code -- '*_usdt*' || { echo "generated files are stale: run go generate ./..."; exit 1; }

unit:
	$(GO) test -count=1 -timeout 30m ./...

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s ./internal/provider
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s ./rules

clean:
	rm -rf $(BIN)
