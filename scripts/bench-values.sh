#!/usr/bin/env bash
# bench-values.sh measures what reading Go values costs a traced call:
# the time per call of handle(r *http.Request) traced by usdt-toolexec
# trace, which reads the request through its layout (method, URL, header
# map, ...) at every call, against handleRaw(unsafe.Pointer), the same
# request passed as a bare address (an event without values), and against
# the kernel floor, bpftrace counting the calls of handle (a uprobe and
# a map update, no event). Untraced times are printed too. ring-values and
# ring-scalar are the same two traced through the in-process ring
# (trace -transport ring), where every read of a value the probe does not
# hold is a process_vm_readv of the process itself.
#
# Environment:
#   COUNT=3      passes (the summary gives the median)
#   N=500000     calls per run
#   OUT=         directory for builds and raw results (a new temp dir if
#                empty)
#
# Needs root (BPF) and bpftrace.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
COUNT=${COUNT:-3}
N=${N:-500000}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-values.XXXXXX")}
mkdir -p "$OUT/mod"
echo "# building into $OUT" >&2
go build -o "$OUT/" ./cmd/usdt-toolexec
cp scripts/testdata/values/main.go scripts/testdata/values/rules.yml "$OUT/mod/"
printf 'module example.com/values\n\ngo 1.24\n' >"$OUT/mod/go.mod"
(cd "$OUT/mod" && CGO_ENABLED=0 go build -toolexec="$OUT/usdt-toolexec -rules $OUT/mod/rules.yml" -o "$OUT/values" .)
bin=$OUT/values
tool=$OUT/usdt-toolexec

loopNs() { awk '$1 == "loop_ns" { print $2 }'; }
raw=$OUT/raw.txt
: >"$raw"
for ((i = 1; i <= COUNT; i++)); do
	echo "# pass $i/$COUNT" >&2
	for mode in req raw; do
		echo "untraced-$mode $("$bin" -mode $mode -n "$N" | loopNs)" >>"$raw"
	done
	echo "trace-values $("$tool" trace -transport bpf main.handle -- "$bin" -mode req -n "$N" 2>&1 >"$OUT/events-req" | loopNs)" >>"$raw"
	echo "trace-scalar $("$tool" trace -transport bpf main.handleRaw -- "$bin" -mode raw -n "$N" 2>&1 >"$OUT/events-raw" | loopNs)" >>"$raw"
	echo "ring-values $("$tool" trace -transport ring main.handle -- "$bin" -mode req -n "$N" 2>&1 >"$OUT/ring-req" | loopNs)" >>"$raw"
	echo "ring-scalar $("$tool" trace -transport ring main.handleRaw -- "$bin" -mode raw -n "$N" 2>&1 >"$OUT/ring-raw" | loopNs)" >>"$raw"
	echo "bpftrace-count $(bpftrace -e "usdt:$bin:vals:entry__main__handle { @n = count(); }" -c "$bin -mode req -n $N" 2>&1 | loopNs)" >>"$raw"
done
echo "# one event of each:" >&2
head -1 "$OUT/events-req" >&2
head -1 "$OUT/events-raw" >&2
printf '%-16s %s\n' case "ns/call (median of $COUNT)"
for c in untraced-req untraced-raw trace-values trace-scalar ring-values ring-scalar bpftrace-count; do
	awk -v c="$c" -v n="$N" '$1 == c { print $2 / n }' "$raw" | sort -n |
		awk -v c="$c" '{ v[NR] = $1 } END { printf "%-16s %.0f\n", c, v[int((NR + 1) / 2)] }'
done
