#!/usr/bin/env bash
# bench-ring.sh measures what a traced call costs when the probes record in
# the process (usdt-toolexec trace -transport ring), against the kernel's
# floor for one uprobe fire and against the BPF transport, in the same
# runs.
#
# It builds scripts/testdata/fire with this tree's tools and
# scripts/testdata/fire/fire.c with gcc. Then, COUNT times, in a rotating
# order so that a noisy stretch of the machine hits every case:
#
#   floor        cfire nop5: a 5-byte NOP in C under bpftrace's
#                uprobe { @n = count(); }, the cheapest fire the kernel
#                has (optimized on Linux 6.18+); per fire
#   ring-stats   fire -mode pair (pair(a, b int), entry and exit probes)
#                under trace -transport ring -stats: the program counts
#   ring-events  the same under trace -transport ring, every event
#                printed to a file
#   bpf-stats    the same under trace -transport bpf -stats: two
#                uprobe fires per call, counted in the kernel
#   gen-ring     fire -mode gen (the usdtgen probe fire:tick, one int64)
#                under trace -transport ring -stats; per fire
#   gen-bpf      the same under trace -transport bpf -stats
#
# Each program times its own loop of N iterations; a case's cost is
# (traced - untraced loop time) / N, per call of pair (two probes) or per
# fire of the floor. The summary prints the medians and each case's
# ratio to the floor, and the events the ring lost.
#
# With jsonnet in WORKLOADS it also builds go-jsonnet v0.21.0's
# cmd/jsonnet plain and with every function of github.com/google/go-jsonnet/...
# probed (what the compiler inlines left as it is), and times, COUNT
# times, 20 evaluations of a snippet (scripts/testdata/jsonnet/work.jsonnet) plain, probed
# and untraced, under trace -transport ring -stats and under trace
# -transport bpf -stats: whole processes, the tracer's start-up included.
# The anchor is scripts/testdata/jsonnettrace, the same evaluation built
# plain, timed without and with Go's execution tracer (runtime/trace).
#
# Environment:
#   WORKLOADS="fire jsonnet"
#   COUNT=3      passes
#   N=1000000    iterations (the floor and the BPF cases run N/10: a trap
#                costs a thousand times a ring's record)
#   OUT=         directory for builds and raw results (a new temp dir if
#                empty)
#
# Needs root (BPF), bpftrace and gcc.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
root=$PWD
WORKLOADS=${WORKLOADS:-fire jsonnet}
COUNT=${COUNT:-3}
N=${N:-1000000}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-ring.XXXXXX")}
src=$root/scripts/testdata/fire
mkdir -p "$OUT"
# shellcheck source=scripts/fire-build.sh
source "$root/scripts/fire-build.sh"

build_tree
gcc -O2 -o "$OUT/cfire" "$src/fire.c"

loopNs() { awk '$1 == "loop_ns" { print $2 }' "$@"; }
raw=$OUT/raw.txt
: >"$raw"
slow=$((N / 10))
# run CASE prints the case's traced and untraced loop times and the
# events it lost, checking that it saw every call.
run() {
	local plain traced lost=0 out
	case $1 in
	floor)
		plain=$("$OUT/cfire" nop5 "$slow" | loopNs)
		out=$(bpftrace -e "uprobe:$OUT/cfire:site5 { @n = count(); }" -c "$OUT/cfire nop5 $slow" 2>&1)
		traced=$(loopNs <<<"$out")
		grep -q "@n: $slow\$" <<<"$out" || { echo "floor: bpftrace did not count $slow fires:" >&2; echo "$out" >&2; exit 1; }
		;;
	ring-stats | bpf-stats | gen-ring | gen-bpf)
		local n=$N transport=ring mode=pair probe=main.pair
		[[ $1 == *bpf* ]] && n=$slow transport=bpf
		[[ $1 == gen-* ]] && mode=gen probe=fire:tick
		plain=$("$fire" -mode $mode -n "$n" | loopNs)
		out=$("$tool" trace -transport "$transport" -stats "$probe" -- "$fire" -mode $mode -n "$n" 2>&1)
		traced=$(loopNs <<<"$out")
		grep -q "^$probe: $n calls" <<<"$out" || { echo "$1: trace did not count $n calls:" >&2; echo "$out" >&2; exit 1; }
		;;
	ring-events)
		plain=$("$fire" -mode pair -n "$N" | loopNs)
		"$tool" trace -transport ring 'main.pair' -- "$fire" -mode pair -n "$N" >"$OUT/events" 2>"$OUT/stderr"
		traced=$(loopNs "$OUT/stderr")
		lost=$(awk '/lost [0-9]+ events/ { for (i = 1; i <= NF; i++) if ($i == "lost") print $(i + 1) }' "$OUT/stderr" | grep . || echo 0)
		local printed
		printed=$(wc -l <"$OUT/events")
		((printed + lost == 2 * N)) || { echo "ring-events: $printed printed and $lost lost, want $((2 * N)) events" >&2; exit 1; }
		;;
	esac
	echo "$plain $traced $lost"
}
case " $WORKLOADS " in *" jsonnet "*)
	fetch_module github.com/google/go-jsonnet@v0.21.0 "$OUT/jsonnet"
	printf 'rules:\n  - package: "github.com/google/go-jsonnet/..."\n' >"$OUT/jsonnet.yml"
	(cd "$OUT/jsonnet" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$OUT/jsonnet.plain" ./cmd/jsonnet)
	(cd "$OUT/jsonnet" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -toolexec="$tool -rules $OUT/jsonnet.yml" -o "$OUT/jsonnet.probed" ./cmd/jsonnet)
	# The anchor: the same evaluation under Go's execution tracer.
	mkdir -p "$OUT/jsonnet/cmd/jsonnettrace"
	cp scripts/testdata/jsonnettrace/main.go "$OUT/jsonnet/cmd/jsonnettrace/"
	(cd "$OUT/jsonnet" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -o "$OUT/jsonnettrace" ./cmd/jsonnettrace)
	cp scripts/testdata/jsonnet/work.jsonnet "$OUT/work.jsonnet"
	: >"$OUT/jsonnet.txt"
	seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>"$OUT/stderr"; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
	for ((i = 1; i <= COUNT; i++)); do
		echo "# jsonnet pass $i/$COUNT" >&2
		{
			echo "plain $(seconds "$OUT/jsonnet.plain" "$OUT/work.jsonnet")"
			echo "probed $(seconds "$OUT/jsonnet.probed" "$OUT/work.jsonnet")"
			echo "ring-stats $(seconds "$tool" trace -transport ring -stats -- "$OUT/jsonnet.probed" "$OUT/work.jsonnet")"
			echo "bpf-stats $(seconds "$tool" trace -transport bpf -stats -- "$OUT/jsonnet.probed" "$OUT/work.jsonnet")"
			echo "anchor $(seconds "$OUT/jsonnettrace" "$OUT/work.jsonnet")"
			echo "runtime-trace $(seconds "$OUT/jsonnettrace" -trace "$OUT/runtime.trace" "$OUT/work.jsonnet")"
		} >>"$OUT/jsonnet.txt"
	done
	echo "go-jsonnet, $("$tool" list "$OUT/jsonnet.probed" | tail -n +2 | wc -l) probes, 20 evaluations, whole process, medians of $COUNT:"
	awk "$SORTMED"'
		{ t[$1] = t[$1] " " $2 }
		function median(s,   a) { return sortmed(a, split(s, a, " ")) }
		END {
			p = median(t["plain"])
			split("plain probed ring-stats bpf-stats anchor", order, " ")
			for (i = 1; i <= 5; i++) printf "%-13s %8.3f s %8.3fx of plain\n", order[i], median(t[order[i]]), p / median(t[order[i]])
			a = median(t["anchor"])
			printf "%-13s %8.3f s %8.3fx of the anchor untraced (Go'"'"'s execution tracer)\n", "runtime-trace", median(t["runtime-trace"]), a / median(t["runtime-trace"])
		}' "$OUT/jsonnet.txt"
	;;
esac
case " $WORKLOADS " in *" fire "*) ;; *) exit 0 ;; esac

cases=(floor ring-stats ring-events bpf-stats gen-ring gen-bpf)
for ((i = 1; i <= COUNT; i++)); do
	echo "# pass $i/$COUNT" >&2
	for ((j = 0; j < ${#cases[@]}; j++)); do
		c=${cases[(i + j) % ${#cases[@]}]}
		result=$(run "$c")
		echo "$c $i $result" >>"$raw"
	done
done

echo "kernel $(uname -r), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), N=$N (floor and bpf-stats: $slow), $COUNT passes"
awk -v N="$N" -v slow="$slow" "$SORTMED"'
	{ n = ($1 == "floor" || $1 == "bpf-stats" || $1 == "gen-bpf") ? slow : N
	  cost[$1] = cost[$1] " " ($4 - $3) / n; lost[$1] += $5 }
	function median(s,   a) { return sortmed(a, split(s, a, " ")) }
	END {
		f = median(cost["floor"])
		printf "%-12s %14s %10s %10s\n", "case", "ns (median)", "x floor", "lost"
		split("floor ring-stats ring-events bpf-stats gen-ring gen-bpf", order, " ")
		for (i = 1; i <= 6; i++) {
			c = order[i]; m = median(cost[c])
			printf "%-12s %14.1f %10.3f %10d\n", c, m, m / f, lost[c]
		}
		print "floor and gen-*: per fire; the others: per call of pair, two probes (entry and exit)"
	}' "$raw"
