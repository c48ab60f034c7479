#!/usr/bin/env bash
# bench-trace.sh measures usdt-toolexec trace's throughput and what it
# costs the traced program, beside bpftrace counting the same probe.
#
# It builds scripts/testdata/fire with this tree's tools, then, COUNT
# times:
#
#   rate R       for each R in RATES, `fire -mode gen -n N -rate R` (the
#                usdtgen probe fire:tick, R fires per second at most, 0 for
#                no limit) under `usdt-toolexec trace fire:tick`, its
#                events written to a file: the rate the program reached,
#                the events printed and the events trace reports lost
#   slowdown     `fire -mode gen -n N` and `fire -mode get -n N` (Cache.Get,
#                an entry and an exit probe per call) untraced, under
#                usdt-toolexec trace and under `bpftrace -e '... { @n =
#                count(); }'` on the same probes, in a rotating order
#
# The summary prints, per rate, the medians over the passes, and per case
# the median loop time per fire or call, untraced and traced by each.
#
# Environment:
#   COUNT=3              passes
#   N=1000000            fires (calls for get) per run
#   RATES="100000 200000 400000 0"
#   TRANSPORT=bpf        the rate runs' transport: ring records in the
#                        process (the slowdown cases stay BPF's)
#   BUFFER=              the rate runs' -buffer, if set (the ring's per
#                        P, BPF's in all)
#   OUT=                 directory for builds and raw results (a new temp
#                        dir if empty)
#
# Needs root (BPF) and bpftrace.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
COUNT=${COUNT:-3}
N=${N:-1000000}
RATES=${RATES:-100000 200000 400000 0}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-trace.XXXXXX")}
src=$root/scripts/testdata/fire
mkdir -p "$OUT"
# shellcheck source=scripts/fire-build.sh
source "$root/scripts/fire-build.sh"

build_tree

raw=$OUT/raw.txt
: >"$raw"
loopNs() { awk '$1 == "loop_ns" { print $2 }' "$@"; }
TRANSPORT=${TRANSPORT:-bpf}
BUFFER=${BUFFER:-}
# trace TRANSPORT PROBES... -- CMD runs CMD under usdt-toolexec trace and
# prints the loop time, the events printed and the events lost.
trace() {
	local transport=$1
	shift
	"$tool" trace -transport "$transport" "$@" >"$OUT/events" 2>"$OUT/stderr"
	printf '%s %s %s\n' "$(loopNs "$OUT/stderr")" "$(wc -l <"$OUT/events")" \
		"$(awk '/lost [0-9]+ events/ { for (i = 1; i <= NF; i++) if ($i == "lost") print $(i + 1) }' "$OUT/stderr" | grep . || echo 0)"
}
declare -A probesOf=([gen]="fire:tick" [get]="fire:*Cache__Get")
declare -A scriptOf=(
	[gen]="usdt:$fire:fire:tick { @n = count(); }"
	[get]="usdt:$fire:fire:entry__main__Cache__Get, usdt:$fire:fire:exit__main__Cache__Get { @n = count(); }"
)
modes=(gen get)
for ((i = 1; i <= COUNT; i++)); do
	echo "# pass $i/$COUNT" >&2
	for r in $RATES; do
		read -r ns printed lost < <(trace "$TRANSPORT" ${BUFFER:+-buffer "$BUFFER"} fire:tick -- "$fire" -mode gen -n "$N" -rate "$r")
		echo "rate $r $i $ns $printed $lost" >>"$raw"
	done
	for ((j = 0; j < ${#modes[@]}; j++)); do
		m=${modes[(i + j) % ${#modes[@]}]}
		fires=$N
		[[ $m == get ]] && fires=$((2 * N))
		plain=$("$fire" -mode "$m" -n "$N" | loopNs)
		read -r traced printed lost < <(trace bpf "${probesOf[$m]}" -- "$fire" -mode "$m" -n "$N")
		out=$(bpftrace -e "${scriptOf[$m]}" -c "$fire -mode $m -n $N" 2>&1)
		bt=$(loopNs <<<"$out")
		counted=$(awk '$1 == "@n:" { print $2 }' <<<"$out")
		if [[ $counted != "$fires" ]]; then
			printf '%s: bpftrace counted %s fires, want %s:\n%s\n' "$m" "${counted:-no}" "$fires" "$out" >&2
			exit 1
		fi
		echo "slow $m $i $plain $traced $printed $lost $bt $fires" >>"$raw"
	done
done

echo "raw results: $raw"
echo "kernel $(uname -r), $(nproc) cpus: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "N=$N COUNT=$COUNT TRANSPORT=$TRANSPORT BUFFER=${BUFFER:-default}"
echo
awk -v n="$N" -v transport="$TRANSPORT" '
function median(list,    a, m, i, j, t) {
	m = split(list, a, " ")
	for (i = 2; i <= m; i++) {
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) {
			a[j + 1] = a[j]
		}
		a[j + 1] = t
	}
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
function add(arr, k, v) { arr[k] = arr[k] " " v }
$1 == "rate" {
	if (!($2 in seen)) { order[++nr] = $2; seen[$2] = 1 }
	add(reached, $2, n / ($4 / 1e9)); add(printed, $2, $5); add(lost, $2, $6)
	if ($6 > 0) { lossy[$2]++ }
	runs[$2]++
}
$1 == "slow" {
	if (!($2 in sseen)) { sorder[++ns] = $2; sseen[$2] = 1 }
	add(plain, $2, $4 / $9); add(traced, $2, $5 / $9); add(bt, $2, $8 / $9)
	add(sprinted, $2, $6); add(slost, $2, $7)
	if ($6 + $7 != $9) { short[$2]++ }
}
END {
	printf "trace -transport %s fire:tick, N=%d fires per run, events to a file:\n", transport, n
	printf "%-10s %14s %12s %10s %s\n", "rate", "reached/s", "printed", "lost", "runs with loss"
	for (i = 1; i <= nr; i++) {
		r = order[i]
		printf "%-10s %14.0f %12.0f %10.0f %d of %d\n", r == 0 ? "unlimited" : r, median(reached[r]), median(printed[r]), median(lost[r]), lossy[r], runs[r]
	}
	print ""
	print "the program per fire (gen) or per call (get, 2 fires), ns, medians:"
	printf "%-5s %10s %10s %10s %12s %12s %12s\n", "case", "untraced", "trace", "bpftrace", "trace x", "bpftrace x", "trace lost"
	for (i = 1; i <= ns; i++) {
		m = sorder[i]
		f = (m == "get") ? 2 : 1
		p = median(plain[m]) * f; t = median(traced[m]) * f; b = median(bt[m]) * f
		printf "%-5s %10.1f %10.1f %10.1f %11.2fx %11.2fx %12.0f\n", m, p, t, b, t / p, b / p, median(slost[m])
	}
	for (m in short) {
		printf "\n%s: %d runs where printed + lost != fires\n", m, short[m]
	}
}' "$raw"
