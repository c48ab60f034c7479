#!/usr/bin/env bash
# bench.sh runs the probe-cost benchmarks of internal/testing/bench in both build
# routes, side by side, and prints what a probe adds per call:
#
#   plan9: CGO_ENABLED=0 go test -toolexec=usdt-toolexec  (Plan9 stubs,
#          semaphore = a uint16 in a Go table)
#   cgo:   CGO_ENABLED=1 go test                          (GNU .S stubs,
#          semaphore = a C variable read through cgo)
#
# Each route's test binary is built once. Then, COUNT times, every
# benchmark runs once in each route, as its own process, alternating the
# routes: a noisy stretch of the machine hits both routes and neighbouring
# benchmarks rather than all passes of one.
#
# The BenchmarkPaired* benchmarks are the noise-robust figure for a
# disabled probe: they time short blocks of the plain loop and of the probed
# loop alternately inside one process and report the medians, per call, of
# plain-ns/call, probe-ns/call and added-ns/call.
#
# Environment:
#   COUNT=10        passes per route
#   BENCH=.         -bench regexp
#   BENCHTIME=      -benchtime (the testing default when empty)
#   OUT=            directory for the raw results (a new temp dir if empty)
#   LDFLAGS=        -ldflags of both test binaries, e.g. -funcalign=64 to
#                   check that a difference is not a code-placement effect
#   BENCHSTAT=auto  auto: benchstat from PATH, else
#                   `go run golang.org/x/perf/cmd/benchstat@latest`;
#                   0: never (the awk summary is printed either way)
#
# Equivalent one-route commands, from the repository root:
#   CGO_ENABLED=0 go test -toolexec=/path/to/usdt-toolexec -run='^$' -bench=. -benchmem -count=10 ./internal/testing/bench
#   CGO_ENABLED=1 go test -run='^$' -bench=. -benchmem -count=10 ./internal/testing/bench
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNT=${COUNT:-10}
BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-}
BENCHSTAT=${BENCHSTAT:-auto}
LDFLAGS=${LDFLAGS:-}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench.XXXXXX")}
mkdir -p "$OUT"
bin="$OUT/bin"
mkdir -p "$bin"

echo "# building usdt-toolexec and the two test binaries into $bin" >&2
go build -o "$bin/usdt-toolexec" ./cmd/usdt-toolexec
CGO_ENABLED=0 go test -c -toolexec="$bin/usdt-toolexec" -ldflags="$LDFLAGS" -o "$bin/plan9.test" ./internal/testing/bench
CGO_ENABLED=1 go test -c -ldflags="$LDFLAGS" -o "$bin/cgo.test" ./internal/testing/bench

args=(-test.run='^$' -test.benchmem -test.count=1)
if [[ -n $BENCHTIME ]]; then
	args+=(-test.benchtime="$BENCHTIME")
fi

routes=(plan9 cgo)
for r in "${routes[@]}"; do
	: >"$OUT/$r.txt"
done
mapfile -t benches < <(cd internal/testing/bench && "$bin/plan9.test" -test.list="$BENCH" | grep '^Benchmark')
if ((${#benches[@]} == 0)); then
	echo "no benchmark matches BENCH=$BENCH" >&2
	exit 1
fi
for ((i = 1; i <= COUNT; i++)); do
	echo "# pass $i/$COUNT" >&2
	for ((j = 0; j < ${#benches[@]}; j++)); do
		# Alternate which route goes first.
		order=("${routes[@]}")
		if (((i + j) % 2 == 0)); then
			order=(cgo plan9)
		fi
		for r in "${order[@]}"; do
			# The test binary runs in its package directory, as
			# go test would run it.
			(cd internal/testing/bench && "$bin/$r.test" "${args[@]}" -test.bench="^${benches[j]}\$") >>"$OUT/$r.txt"
		done
	done
done

echo "raw results: $OUT/plan9.txt $OUT/cgo.txt"
echo

# The summary, per route. For each benchmark: the median, mean and spread
# of ns/op over the passes, what it adds to BenchmarkPlain of the same route
# (median minus median) and the ratio to it, and allocs/op. For the paired
# benchmarks: the medians over the passes of their per-call medians.
for r in "${routes[@]}"; do
	echo "== route $r ($(grep -m1 '^cpu:' "$OUT/$r.txt" || echo 'cpu: ?'))"
	awk "$SORTMED"'
	/^Benchmark/ {
		name = $1
		sub(/^Benchmark/, "", name)
		sub(/-[0-9]+$/, "", name)
		if (!(name in seen)) {
			seen[name] = 1
			order[++names] = name
		}
		for (f = 3; f < NF; f += 2) {
			unit = $(f + 1)
			k = ++n[name, unit]
			v[name, unit, k] = $f
			sum[name, unit] += $f
		}
	}
	# median is the median of the samples of name and unit; it sets lo and hi.
	function median(name, unit,    i, a) {
		for (i = 1; i <= n[name, unit]; i++) {
			a[i] = v[name, unit, i]
		}
		return sortmed(a, n[name, unit])
	}
	END {
		base = ("Plain" SUBSEP "ns/op") in n ? median("Plain", "ns/op") : 0
		for (i = 1; i <= names; i++) {
			name = order[i]
			if (name ~ /^Paired/ || !((name SUBSEP "ns/op") in n)) {
				continue
			}
			if (!plainHeader++) {
				printf "%-28s %3s %9s %9s %17s %9s %7s %9s\n", "benchmark", "n", "median", "mean", "min..max", "+ns/call", "ratio", "allocs/op"
			}
			allocs = (name SUBSEP "allocs/op") in n ? median(name, "allocs/op") : "-"
			m = median(name, "ns/op")
			added = "-"
			ratio = "-"
			if (base > 0 && name != "Plain") {
				added = sprintf("%+.3f", m - base)
				ratio = sprintf("%.3f", m / base)
			}
			printf "%-28s %3d %9.3f %9.3f %8.3f..%-8.3f %9s %7s %9s\n", name, n[name, "ns/op"], m, sum[name, "ns/op"] / n[name, "ns/op"], lo, hi, added, ratio, allocs
		}
		for (i = 1; i <= names; i++) {
			name = order[i]
			if (name !~ /^Paired/ || !((name SUBSEP "added-ns/call") in n)) {
				continue
			}
			if (!pairedHeader++) {
				printf "%s%-28s %3s %9s %9s %13s %17s %7s\n", plainHeader ? "\n" : "", "paired (medians)", "n", "plain", "probe", "added ns/call", "added min..max", "ratio"
			}
			p = median(name, "plain-ns/call")
			q = median(name, "probe-ns/call")
			a = median(name, "added-ns/call")
			printf "%-28s %3d %9.3f %9.3f %+13.3f %+8.3f..%-+8.3f %7.3f\n", name, n[name, "added-ns/call"], p, q, a, lo, hi, q / p
		}
	}' "$OUT/$r.txt"
	echo
done
echo "ns/op is per loop iteration around one non-inlined call; +ns/call and"
echo "ratio compare medians with BenchmarkPlain of the same route. The paired"
echo "rows time the plain and probed loops in alternating blocks of one process."

find_benchstat
if ((${#benchstat[@]})); then
	for r in "${routes[@]}"; do
		echo
		echo "== benchstat, route $r: each benchmark against BenchmarkPlain"
		# Project the benchmark name onto columns: the first column
		# (Plain) is the baseline the others are compared with.
		"${benchstat[@]}" -col .name -filter '-.name:/^Paired/ .unit:sec/op' "$OUT/$r.txt"
	done
	echo
	echo "== benchstat: route plan9 against route cgo"
	"${benchstat[@]}" -filter .unit:sec/op plan9="$OUT/plan9.txt" cgo="$OUT/cgo.txt"
fi
