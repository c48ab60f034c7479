#!/usr/bin/env bash
# bench-killed.sh measures a program's speed after the ring trace that
# counted its calls was killed with SIGKILL: the trace's lease runs out
# within a second, the program's next fire turns off every probe the trace
# turned on, and from then on it runs at its untraced speed
# (docs/tracing.md, "A trace that dies").
#
# It builds scripts/testdata/fire with this tree's tools, as
# bench-ring.sh does. Then, COUNT times, one process of
# fire -mode pair -n N -windows (pair(a, b int), entry and exit probes)
# times its loop in four windows, in this order, after one of warm-up:
#
#   before   untraced
#   traced   under trace -transport ring -stats -p PID main.pair, attached
#            (N/20 calls: each is a record)
#   killed   2 s after trace was killed with SIGKILL (its lease is 1 s):
#            the window's first fire turns the probes off
#   again    the next window, as a check on the machine's drift
#
# The summary prints each window's median time per call and its ratio to
# "before" in the same processes: "killed" at 1.00x is the claim.
#
# Environment:
#   COUNT=5      processes
#   N=200000000  calls of pair a window
#   OUT=         directory for builds and raw results (a new temp dir if
#                empty)
#
# Needs no root: the ring trace of -p runs as the program's user.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
root=$PWD
COUNT=${COUNT:-5}
N=${N:-200000000}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-killed.XXXXXX")}
src=$root/scripts/testdata/fire
mkdir -p "$OUT"
# shellcheck source=scripts/fire-build.sh
source "$root/scripts/fire-build.sh"

build_tree
raw=$OUT/raw.txt
: >"$raw"

for pass in $(seq 1 "$COUNT"); do
	coproc FIRE { exec "$fire" -mode pair -n "$N" -windows; }
	pid=$FIRE_PID
	in=${FIRE[1]} out=${FIRE[0]}
	read -r ready <&"$out"
	[[ $ready == ready ]] || { echo "fire said $ready, want ready" >&2; exit 1; }
	# window NAME [CALLS] times one loop of CALLS (N) and records the
	# time a call.
	window() {
		local key ns calls=${2:-$N}
		echo "$calls" >&"$in"
		read -r key ns <&"$out"
		[[ $key == loop_ns ]] || { echo "fire said $key $ns, want loop_ns" >&2; exit 1; }
		echo "$pass $1 $(awk -v ns="$ns" -v n="$calls" 'BEGIN { printf "%.4f", ns / n }')" >>"$raw"
	}
	window warm-up
	window before
	"$tool" trace -v -transport ring -stats -p "$pid" main.pair >"$OUT/trace.out" 2>"$OUT/trace.err" &
	tr=$!
	for _ in $(seq 300); do
		grep -q '^usdt-toolexec trace: attached' "$OUT/trace.err" && break
		kill -0 "$tr" 2>/dev/null || break
		sleep 0.1
	done
	grep -q '^usdt-toolexec trace: attached' "$OUT/trace.err" || { echo "trace did not attach:" >&2; cat "$OUT/trace.err" >&2; exit 1; }
	window traced $((N / 20))
	kill -KILL "$tr"
	wait "$tr" 2>/dev/null || true
	sleep 2
	window killed
	window again
	exec {in}>&-
	wait "$pid"
	echo "pass $pass: $(awk -v p="$pass" '$1 == p { printf "%s %.2f ns  ", $2, $3 }' "$raw")" >&2
done

echo
echo "# fire -mode pair, $N calls a window, $COUNT processes: median ns a call, and the median of each process's ratio to its before"
awk "$SORTMED"'
{ ns[$1, $2] = $3; passes[$1] = 1 }
END {
	split("before traced killed again", order, " ")
	for (o = 1; o <= 4; o++) {
		w = order[o]
		k = 0
		for (p in passes) a[++k] = ns[p, w]
		m = sortmed(a, k)
		spread = sprintf("%.2f-%.2f", lo, hi)
		k = 0
		for (p in passes) a[++k] = ns[p, w] / ns[p, "before"]
		printf "%-7s %7.2f ns a call (%s)  %.3fx of before (%.3f-%.3f)\n", w, m, spread, sortmed(a, k), lo, hi
	}
}' "$raw"
