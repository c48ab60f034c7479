#!/usr/bin/env bash
# real-modules.sh runs the test suites of widely used modules, fetched at
# pinned versions through the module proxy, with every function of the
# module instrumented: first untraced, then with bpftrace attached to every
# probe of the test binary. A suite that passes plain must pass both ways.
# For each package it prints the probes in the test binary, how long
# bpftrace took to attach them, and the suite's wall time plain,
# instrumented untraced, and traced.
#
#   github.com/BurntSushi/toml   a parser
#   golang.org/x/sync            concurrency (errgroup, semaphore, singleflight)
#   github.com/go-chi/chi/v5     an HTTP router
#
# Environment:
#   MODULES="path@version:pkg,pkg ..."   what to run (the three above if empty)
#   OUT=                                 work directory (a new temp dir if empty)
# Needs root (bpftrace) and tracefs; without bpftrace the traced column is
# "-" and says why once.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$(mktemp -d /tmp/usdt-real-modules-XXXXXX)}
mkdir -p "$out"
modules=${MODULES:-"github.com/BurntSushi/toml@v1.4.0:. golang.org/x/sync@v0.10.0:./errgroup,./semaphore,./singleflight github.com/go-chi/chi/v5@v5.1.0:.,./middleware"}

go build -o "$out/usdt-toolexec" ./cmd/usdt-toolexec
export CGO_ENABLED=0 GOFLAGS=-mod=mod

bt=1
if ! command -v bpftrace >/dev/null; then
	echo "bpftrace not found: no traced runs" >&2
	bt=0
fi

# seconds runs a command and prints its wall time in seconds; the
# command's own output goes to $log.
seconds() {
	local start end
	start=$(date +%s.%N)
	"$@" >>"$log" 2>&1 || { echo "FAILED: $* (see $log)" >&2; return 1; }
	end=$(date +%s.%N)
	echo "$end - $start" | bc
}

# traced runs the test binary $1 (in directory $2) while bpftrace is
# attached to every probe of it; prints "attach_seconds run_seconds".
traced() {
	local bin=$1 dir=$2 btout=$out/bpftrace.out start ready pid
	start=$(date +%s.%N)
	BPFTRACE_MAX_PROBES=100000 BPFTRACE_MAX_BPF_PROGS=100000 bpftrace -e "usdt:$bin:* { @hits = count(); } BEGIN { printf(\"ready\n\"); }" >"$btout" 2>&1 &
	pid=$!
	until grep -q '^ready' "$btout"; do
		if ! kill -0 $pid 2>/dev/null; then
			echo "bpftrace exited before attaching:" >&2
			cat "$btout" >&2
			return 1
		fi
		sleep 0.1
	done
	ready=$(date +%s.%N)
	local run
	run=$(cd "$dir" && seconds "$bin" -test.count=1) || { kill -INT $pid; return 1; }
	# bpftrace may not yet have its SIGINT handler in place when the
	# suite ends early: ask until it exits.
	while kill -INT $pid 2>/dev/null; do
		sleep 1
	done
	wait $pid || true
	grep -h '^@hits' "$btout" >>"$log" || true
	printf '%.2f %.2f %s\n' "$(echo "$ready - $start" | bc)" "$run" "$(grep -h '^@hits' "$btout" | awk '{print $2}')"
}

printf '%-40s %7s %9s %8s %8s %9s %10s\n' package probes attach_s plain_s inst_s traced_s hits
for spec in $modules; do
	modver=${spec%%:*}
	pkgs=${spec#*:}
	mod=${modver%@*}
	src=$(go mod download -json "$modver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	work=$out/$(echo "$mod" | tr / _)
	rm -rf "$work"
	cp -r "$src" "$work"
	chmod -R u+w "$work"
	printf 'rules:\n  - package: "%s/..."\n' "$mod" >"$work/usdt.yml"
	log=$out/$(echo "$mod" | tr / _).log
	: >"$log"
	(cd "$work" && go mod download >>"$log" 2>&1)
	for pkg in ${pkgs//,/ }; do
		name=$mod${pkg#.}
		dir=$work/$pkg
		plain=$out/$(echo "$name" | tr / _).plain.test
		inst=$out/$(echo "$name" | tr / _).inst.test
		(cd "$work" && go test -c -o "$plain" "$pkg" >>"$log" 2>&1)
		(cd "$work" && go test -c -o "$inst" -toolexec="$out/usdt-toolexec -rules $work/usdt.yml" "$pkg" >>"$log" 2>&1)
		probes=$("$out/usdt-toolexec" list "$inst" | tail -n +2 | grep -c . || true)
		p=$(cd "$dir" && seconds "$plain" -test.count=1)
		i=$(cd "$dir" && seconds "$inst" -test.count=1)
		if [ $bt = 1 ]; then
			read -r a t h < <(traced "$inst" "$dir" || echo "FAILED FAILED -")
		else
			a=- t=- h=-
		fi
		printf '%-40s %7s %9s %8.2f %8.2f %9s %10s\n' "$name" "$probes" "$a" "$p" "$i" "$t" "$h"
	done
done
echo "work directory and logs: $out"
