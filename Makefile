# Two entry points for a fresh machine (see README.md):
#   make example   build the tools, build the examples with probes, list
#                  them, trace them with bpftrace, and with usdt-toolexec
#                  trace: events with Go values, -stats, then -pprof read
#                  by go tool pprof
#   make test      every check CI runs
# Both first run scripts/setup.sh (make setup): it installs the tracers
# when missing and mounts tracefs.
GO          ?= go
BIN         := $(CURDIR)/bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Fuzz budgets are execution counts, 4-10 s each here (each target's
# seed corpus runs in make unit too). A duration
# races Go 1.26's fuzz coordinator at its deadline and fails with a bare
# "context deadline exceeded", no input written (go.dev/issue/75804).
FUZZ_PROVIDER   ?= 200000x
FUZZ_RULES      ?= 125000x
FUZZ_REWRITE    ?= 750x
FUZZ_PROBETABLE ?= 200000x
FUZZ_RECORD     ?= 25000x
FUZZ_NOTES      ?= 225000x
FUZZ_SPECS      ?= 100000x
FUZZ_RING       ?= 75000x
FUZZ_TYPES      ?= 125000x
FUZZ_GOTABLE    ?= 200000x
FUZZ_FUNCCODE   ?= 100000x
FUZZ_PROC       ?= 50000x
FUZZ_PATCH      ?= 30000x
FUZZ_STEP       ?= 300000x

.PHONY: all setup tools example test vet lint unit race vm fuzz generate-check images sid-chroot vm-images jaeger prometheus test-releases clean

all: tools

setup:
	scripts/setup.sh

tools:
	$(GO) build -o $(BIN)/ ./cmd/usdtgen ./cmd/usdt-toolexec ./cmd/usdt-export

example: setup tools
	cd examples/provider && PATH=$(BIN):$$PATH $(GO) generate
	cd examples/provider && CGO_ENABLED=0 $(GO) build -toolexec=$(BIN)/usdt-toolexec -o $(BIN)/jobs .
	$(BIN)/usdt-toolexec list $(BIN)/jobs
	bpftrace -l 'usdt:$(BIN)/jobs:*'
	cd $(BIN) && bpftrace $(CURDIR)/examples/provider/latency.bt -c './jobs -jobs 200 -every 1ms'
	@echo '--- usdt-toolexec trace: the same probes with their values, recorded in the program'"'"'s own memory'
	$(BIN)/usdt-toolexec trace -- $(BIN)/jobs -jobs 4 -every 1ms
	cd examples/toolexec && CGO_ENABLED=0 $(GO) build -toolexec="$(BIN)/usdt-toolexec -v -rules rules.yml" -o $(BIN)/cache .
	bpftrace -l 'usdt:$(BIN)/cache:*'
	$(BIN)/usdt-toolexec bt $(BIN)/cache > $(BIN)/cache.bt
	bpftrace $(BIN)/cache.bt -c '$(BIN)/cache -ops 2000'
	@echo '--- usdt-toolexec trace: every call, with its Go values and goroutine, recorded in the program'"'"'s own memory'
	$(BIN)/usdt-toolexec trace -v -- $(BIN)/cache -ops 6 -workers 2
	@echo '--- trace -stats: calls and latencies counted by the program'
	$(BIN)/usdt-toolexec trace -stats -- $(BIN)/cache -ops 2000
	@echo '--- trace -transport bpf -stats: the same counted in the kernel'
	$(BIN)/usdt-toolexec trace -transport bpf -stats -- $(BIN)/cache -ops 2000
	@echo '--- trace -pprof: wall time per chain of traced calls'
	$(BIN)/usdt-toolexec trace -pprof $(BIN)/cache.pprof -- $(BIN)/cache -ops 2000
	$(GO) tool pprof -top $(BIN)/cache.pprof

# make test runs its stages one after another. Run side by side on a
# machine of two cores, they failed timing checks or took as long
# (docs/testing.md, "Side by side"). Each stage says when it starts.
test: setup vet lint generate-check images
	@date -u '+make test: unit starts at %T'
	$(MAKE) unit
	@date -u '+make test: race starts at %T'
	$(MAKE) race
	@date -u '+make test: vm starts at %T'
	$(MAKE) vm
	@date -u '+make test: fuzz starts at %T'
	$(MAKE) fuzz
	@date -u '+make test: test-releases starts at %T'
	$(MAKE) test-releases
	@date -u '+make test: ends at %T'

# A cache that fails to build: elsewhere make goes on and the tests that
# need it skip, saying why; in CI ($CI set, to anything but 0 or false,
# as tracetest.CI reads it) make stops, as those tests would fail.
cache_failed = { echo "$(1)"; case "$${CI:-}" in ""|0|false|FALSE|False) ;; *) echo "CI is set: the cache must build"; exit 1 ;; esac; }

# The three per-machine caches build side by side: the chroot and the VM
# images mostly wait on Debian's archive, while Jaeger's compile keeps
# both cores busy. Cold, that saves the chroot's and images' minutes.
images:
	$(MAKE) -j3 --output-sync=target sid-chroot vm-images jaeger prometheus

# bpftrace 0.27 and libbpf 1.7 in a Debian sid chroot beside the host's
# (built once per machine, outside the repository); without it their
# subtests skip, saying why (in CI, fail).
sid-chroot:
	scripts/sid-chroot.sh || $(call cache_failed,no sid chroot: the bpftrace 0.27 and libbpf 1.7 subtests will skip)

# Debian 12 root filesystems (amd64, arm64) with the tracers, and the
# kernels (Debian 12's 6.1, Debian 11's 5.10) the VM tests boot under qemu;
# built once per machine, outside the repository.
vm-images:
	scripts/vm-images.sh || $(call cache_failed,no VM images: the VM tests will skip)

# Jaeger v1.76.0, built from the Go module proxy, which the trace -otlp
# test sends its spans to (built once per machine, outside the repository:
# 4.8 minutes on 2 idle cores from cold caches, a 116 MB binary).
jaeger:
	scripts/jaeger.sh || $(call cache_failed,no Jaeger: the trace -otlp test will skip)

# Prometheus v3 (module v0.316.0), built from the Go module proxy, which
# scrapes trace -metrics and takes trace -stats -otlp's metrics in their
# test (built once per machine, outside the repository: 3.7 minutes on 2
# shared cores, a 72 MB binary).
prometheus:
	scripts/prometheus.sh || $(call cache_failed,no Prometheus: the trace -metrics and -stats -otlp test will skip)

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

# TestKernels runs in its own target, verbose, for the table it prints.
# testtimes prints what go test would, then the slowest tests of each
# package that took over a minute: where CI's time goes.
# The end-to-end package, the longest by far (16 minutes with its builds
# cached, 45 when a change to the wrapper makes them cold), is listed
# first: go test starts its packages' runs in the order they are named,
# and in ./...'s order it started 46th of 66, after about 8 minutes of
# the others' tests. The others now run beside it.
E2E_PKG    = github.com/go-usdt/usdt/internal/testing/e2e
UNIT_ORDER = $(E2E_PKG) $(shell $(GO) list ./... | grep -v -x '$(E2E_PKG)')
unit:
	$(GO) run ./internal/testing/testtimes -- $(GO) test -json -count=1 -timeout 75m -skip '^TestKernels$$' $(UNIT_ORDER)

# Under the race detector: the unit tests of every package with -race
# -short (RACE_PKGS; -short leaves out the tests that only build
# programs, 137 s here), then the end-to-end tests of trace (both transports, -stats,
# -p, children, signals, the exporters) with usdt-toolexec and usdt-export
# built with -race (USDT_E2E_RACE=1; usdtgen and the fixture programs
# stay plain builds). Every process the tests start writes its race
# reports to a directory of the harness's (GORACE log_path), stops at
# the first and exits 66; any report there fails the run, whatever the
# test did with the tracer's output and exit status.
# Left out, as trace decodes about ten times slower under the race
# detector: TestTraceInterruptBusy, whose backlog printed after an
# interrupt outlasted 4 times its 5 s; TestTraceOTLPLosses, whose BPF
# run then loses other events, and 1 run in 6 showed a span under a
# caller that never calls it without usdt.parent_uncertain (never in 6
# plain runs; a loss the tracer does not attribute, not a data race).
# Of the unit tests, cmd/usdt-toolexec's scripts are left out: they run
# the test binary as the wrapper, and built with -race it is a new
# wrapper each time, whose every build compiles the standard library
# again under the race detector (past 10 minutes). The wrapper's
# packages run their own tests here.
RACE_PKGS = $(shell $(GO) list ./... | grep -v -E '/(internal/testing/e2e|cmd/usdt-toolexec)$$')
RACE_E2E  ?= ^(TestRingEvents|TestRingChildrenUnprivileged|TestRingStatsUnprivileged|TestRingProviderUnprivileged|TestRingExec|TestRingBufferFull|TestRingBlock|TestRingKilledTracer|TestRingGOMAXPROCSRaised|TestRingCommandSignals|TestRingCommandTracerStopped|TestRingAttachedTracerStopped|TestRingAttachedStatsExit|TestTraceValues|TestTraceCommandOnly|TestTraceStats|TestTraceStatsInterval|TestTracePIDExit|TestTraceOTLP|TestTraceOTLPSpanTimes|TestTraceContext|TestTracePprof|TestMetricsPrometheus|TestRingKilledAnyMoment|TestRingWithBpftrace|TestTraceExe|TestTraceExeMetrics|TestMetricsSpans|TestTraceSwitches|TestSwitchesCounted)$$

race:
	$(GO) test -race -short -count=1 $(RACE_PKGS)
	USDT_E2E_RACE=1 $(GO) test -count=1 -timeout 30m -run '$(RACE_E2E)' ./internal/testing/e2e/

# The attach tests on the kernels of the VM images (Debian 12's 6.1 and
# Debian 11's 5.10, amd64 and arm64 for 6.1) and on the host, with a table of
# kernel, architecture and consumer at the end.
vm:
	$(GO) test -count=1 -timeout 80m -run '^TestKernels$$' -v ./internal/testing/e2e/

# The Go releases besides the machine's that the tests run on: the go
# command downloads each from the module proxy (GOTOOLCHAIN), in seconds.
# On each, the unit tests of every package whose behaviour the release can
# change (all but the end-to-end one and the harnesses of the benchmarks
# and of the VMs, which the release does not reach), and the end-to-end
# tests that attach tracers to instrumented binaries and check goroutine
# ids, values and elapsed ns, and those of the ring, whose writer reads the
# runtime's g, m and p, not the whole suite. internal/trace's and
# internal/usdtgen's unit tests build and trace programs as those
# end-to-end tests do (255 s and 169 s of the release's 597 s on
# 2026-11-29): the release runs the end-to-end ones. GO_RELEASES=local runs
# the same on the machine's Go.
GO_RELEASES  ?= go1.27.3
UNIT_PKGS     = $(shell $(GO) list ./... | grep -v -E '/internal/(testing/(e2e|bench|benchauto|vm)|trace|usdtgen)$$')
E2E_AUTO     := ^TestAuto$$/^(Arguments|GoroutineIDs|LatencyPairing|Elapsed|Trace)$$
E2E_ATTACH   := ^(TestArgumentsAttachPID|TestTraceTypes|TestTraceTypesRing|TestTraceValues|TestTraceExampleToolexec|TestRingStatsUnprivileged|TestRingEvents|TestNotes)$$

test-releases:
	set -e; for r in $(GO_RELEASES); do \
		GOTOOLCHAIN=$$r $(GO) version; \
		GOTOOLCHAIN=$$r $(GO) test -count=1 -timeout 60m $(UNIT_PKGS); \
		GOTOOLCHAIN=$$r $(GO) test -count=1 -timeout 30m -run '$(E2E_AUTO)' ./internal/testing/e2e/; \
		GOTOOLCHAIN=$$r $(GO) test -count=1 -timeout 30m -run '$(E2E_ATTACH)' ./internal/testing/e2e/; \
	done

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZ_PROVIDER) -fuzzminimizetime=5s ./internal/provider
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZ_RULES) -fuzzminimizetime=5s ./rules
	$(GO) test -run='^$$' -fuzz=FuzzInstrument -fuzztime=$(FUZZ_REWRITE) -fuzzminimizetime=5s ./rewrite
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=$(FUZZ_PROBETABLE) -fuzzminimizetime=5s ./internal/probetable
	$(GO) test -run='^$$' -fuzz=FuzzRecord -fuzztime=$(FUZZ_RECORD) -fuzzminimizetime=5s ./internal/trace
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZ_NOTES) -fuzzminimizetime=5s ./internal/sdtnote
	$(GO) test -run='^$$' -fuzz=FuzzParseArgs -fuzztime=$(FUZZ_SPECS) -fuzzminimizetime=5s ./internal/trace/bpfprog
	$(GO) test -run='^$$' -fuzz=FuzzTake -fuzztime=$(FUZZ_RING) -fuzzminimizetime=5s ./internal/ring
	$(GO) test -run='^$$' -fuzz=FuzzTypeNames -fuzztime=$(FUZZ_TYPES) -fuzzminimizetime=5s ./internal/values
	$(GO) test -run='^$$' -fuzz=FuzzGoTable -fuzztime=$(FUZZ_GOTABLE) -fuzzminimizetime=5s ./internal/funcsites
	$(GO) test -run='^$$' -fuzz=FuzzFind -fuzztime=$(FUZZ_FUNCCODE) -fuzzminimizetime=5s ./internal/funcsites
	$(GO) test -run='^$$' -fuzz=FuzzRead -fuzztime=$(FUZZ_STEP) -fuzzminimizetime=5s ./internal/x86step
	$(GO) test -run='^$$' -fuzz=FuzzPlanCode -fuzztime=$(FUZZ_PATCH) -fuzzminimizetime=5s ./internal/textpatch
	$(GO) test -run='^$$' -fuzz=FuzzStartTime -fuzztime=$(FUZZ_PROC) -fuzzminimizetime=5s ./internal/procstat
	$(GO) test -run='^$$' -fuzz=FuzzContainerID -fuzztime=$(FUZZ_PROC) -fuzzminimizetime=5s ./internal/export/otlp
	$(GO) test -run='^$$' -fuzz=FuzzEnviron -fuzztime=$(FUZZ_PROC) -fuzzminimizetime=5s ./internal/export/otlp

clean:
	rm -rf $(BIN)
