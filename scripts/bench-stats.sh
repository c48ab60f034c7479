#!/usr/bin/env bash
# bench-stats.sh measures what tracing costs a JSON API server on net/http:
# its requests/s under load, untraced and under each tracer counting calls
# and latencies per function.
#
# It builds scripts/testdata/jsonapi with this tree's usdt-toolexec, once
# per rules file: main (its own functions), http (net/http's) and all
# (every function it links), and once plain. Then, COUNT times, for each
# build, in an order that rotates from pass to pass, it starts the server
# on loopback, attaches a tracer to it with -p, and drives it with wrk (8
# connections, 2 threads, DURATION seconds, GET /items/42):
#
#   untraced   no tracer
#   stats      usdt-toolexec trace -stats: counts and histograms in the
#              kernel, nothing sent per call
#   bt-0.17    the script of `usdt-toolexec bt` (a hist() per function on
#              its exit probe) in the host's bpftrace
#   bt-0.27    the same script in bpftrace 0.27 of the sid chroot
#              (scripts/sid-chroot.sh), when there is one
#   events     usdt-toolexec trace, every event printed (to /dev/null)
#   ring-stats usdt-toolexec trace -transport ring -stats: counts and
#              histograms kept by the program in its own memory
#   ring-json  usdt-toolexec trace -transport ring -json, every event
#              written to a file, and the events lost counted
#
# and, with runtime-trace in MODES, the plain build under Go's own
# execution tracer (runtime/trace, the server's -trace), the anchor.
#
# A tracer that has not attached in ATTACH_TIMEOUT seconds (BEGIN fired
# for bpftrace, -v's "attached" for trace) or fails is reported as such,
# and not tried again on that build; every wait and every load is bounded
# in time. The server ends each run
# by being killed, and the tracers must end with it (-p).
#
# Environment:
#   COUNT=3                passes
#   DURATION=5             seconds of load per run
#   ATTACH_TIMEOUT=120     seconds a tracer may take to attach
#   SETS="main http all"   builds to measure
#   MODES="untraced stats bt-0.17 bt-0.27 events ring-stats ring-json runtime-trace"
#   OUT=                   directory for builds and raw results (a new
#                          temp dir if empty; under /tmp, which the sid
#                          chroot shares)
#
# Needs root (BPF), bpftrace, and wrk (installed with apt-get if missing).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
COUNT=${COUNT:-3}
DURATION=${DURATION:-5}
ATTACH_TIMEOUT=${ATTACH_TIMEOUT:-120}
SETS=${SETS:-main http all}
MODES=${MODES:-untraced stats bt-0.17 bt-0.27 events ring-stats ring-json runtime-trace}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-stats.XXXXXX")}
SID=${USDT_SID_CHROOT:-/var/cache/go-usdt/sid}
src=$root/scripts/testdata/jsonapi
mkdir -p "$OUT"

if ! command -v wrk >/dev/null; then
	echo "# installing wrk" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

echo "# building into $OUT" >&2
go build -o "$OUT/" ./cmd/usdt-toolexec
tool=$OUT/usdt-toolexec
(cd "$src" && CGO_ENABLED=0 go build -o "$OUT/jsonapi-plain" .)
for set in $SETS; do
	bin=$OUT/jsonapi-$set
	(cd "$src" && CGO_ENABLED=0 go build -toolexec="$tool -rules $src/rules-$set.yml" -o "$bin" .)
	# BEGIN fires once every probe is attached: the script says so.
	{
		echo 'BEGIN { printf("attached\n"); }'
		"$tool" bt "$bin"
	} >"$OUT/$set.bt" 2>"$OUT/$set.bt.err"
done

# wait_for FILE REGEX PID: waits until FILE has a line matching REGEX
# while PID lives, for ATTACH_TIMEOUT seconds at most.
wait_for() {
	local end=$((SECONDS + ATTACH_TIMEOUT))
	while ((SECONDS < end)); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.2
	done
	return 2
}

# stop PID [SIGNAL]: signals PID and waits 60 s at most for it to end,
# then kills it.
stop() {
	kill -"${2:-TERM}" "$1" 2>/dev/null || true
	for _ in $(seq 600); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

# measure SET MODE prints the requests/s of the server built as SET
# traced as MODE, and a note; or "-" and why not.
measure() {
	local set=$1 mode=$2 bin=$OUT/jsonapi-$1 log=$OUT/tracer.txt
	[[ $set == plain ]] && bin=$OUT/jsonapi-plain
	# Emptied before the server starts, not as it does: the last run's
	# address must not be read.
	: >"$OUT/server.txt"
	: >"$log"
	local flags=()
	[[ $mode == runtime-trace ]] && flags=(-trace "$OUT/runtime.trace")
	"$bin" "${flags[@]}" >>"$OUT/server.txt" 2>&1 &
	local server=$! tracer= addr note=
	wait_for "$OUT/server.txt" '^listening on' "$server" || {
		echo "- the server did not start: $(head -c 200 "$OUT/server.txt")"
		stop "$server"
		return
	}
	addr=$(awk '/^listening on/ { print $3 }' "$OUT/server.txt")
	case $mode in
	untraced) ;;
	stats)
		"$tool" trace -v -transport bpf -stats -p "$server" >"$OUT/stats.txt" 2>"$log" &
		tracer=$!
		;;
	events)
		"$tool" trace -v -transport bpf -p "$server" >/dev/null 2>"$log" &
		tracer=$!
		;;
	ring-stats)
		"$tool" trace -v -transport ring -stats -p "$server" >"$OUT/stats.txt" 2>"$log" &
		tracer=$!
		;;
	ring-json)
		"$tool" trace -v -transport ring -json -p "$server" >"$OUT/events.json" 2>"$log" &
		tracer=$!
		;;
	bt-0.17)
		BPFTRACE_MAX_PROBES=100000 BPFTRACE_MAX_BPF_PROGS=100000 bpftrace -p "$server" "$OUT/$set.bt" >"$log" 2>&1 &
		tracer=$!
		;;
	bt-0.27)
		BPFTRACE_MAX_PROBES=100000 BPFTRACE_MAX_BPF_PROGS=100000 chroot "$SID" env -C / bpftrace -p "$server" "$OUT/$set.bt" >"$log" 2>&1 &
		tracer=$!
		;;
	esac
	if [[ -n $tracer ]]; then
		local t0=$SECONDS rc=0
		wait_for "$log" '^attached|^usdt-toolexec trace: attached' "$tracer" || rc=$?
		if ((rc != 0)); then
			if ((rc == 2)); then
				echo "- not attached in ${ATTACH_TIMEOUT} s"
			else
				# bpftrace warns before it fails: the error is the line.
				echo "- failed: $({ grep -m1 ERROR "$log" || grep -m1 -iE 'error|fail' "$log"; } | cut -c1-120)"
			fi
			stop "$tracer" INT
			stop "$server"
			return
		fi
		note="attached in $((SECONDS - t0)) s"
	fi
	timeout $((DURATION + 30)) wrk -t2 -c8 -d"${DURATION}s" "http://$addr/items/42" >"$OUT/wrk.txt" 2>&1 || true
	local rps requests
	rps=$(awk '$1 == "Requests/sec:" { print $2 }' "$OUT/wrk.txt")
	requests=$(awk '/requests in/ { print $1 }' "$OUT/wrk.txt")
	# The tracer ends with the server it traces.
	stop "$server"
	if [[ -n $tracer ]]; then
		local t1=$SECONDS
		stop "$tracer" INT
		note="$note, ended $((SECONDS - t1)) s after the server"
	fi
	case $mode in
	stats | ring-stats)
		local handled
		handled=$(awk '$1 == "main.(*store).handleItem:" { print $2 }' "$OUT/stats.txt")
		[[ -n $handled ]] && note="$note, counted ${handled} handleItem calls for $requests requests"
		;;
	esac
	if [[ $mode == ring-json ]]; then
		note="$note, $(wc -l <"$OUT/events.json") events written"
	fi
	if [[ $mode == runtime-trace ]]; then
		note="Go's execution trace, $(stat -c %s "$OUT/runtime.trace") bytes"
	fi
	if grep -qE 'lost [0-9]+|not counted' "$log"; then
		note="$note, $(grep -m1 -oE '(lost [0-9]+ events|[0-9]+ probe hits not counted)' "$log")"
	fi
	echo "${rps:--} $note"
}

modes=($MODES)
if [[ " $MODES " == *" bt-0.27 "* && ! -x $SID/usr/bin/bpftrace ]]; then
	echo "# no sid chroot at $SID (scripts/sid-chroot.sh): no bt-0.27" >&2
	modes=("${modes[@]/bt-0.27/}")
fi
raw=$OUT/raw.txt
: >"$raw"
echo "plain 1 untraced $(measure plain untraced)" >>"$raw"
# A tracer that did not attach to a build is not tried on it again: each
# try costs up to ATTACH_TIMEOUT, and the first says why.
declare -A failed
for ((i = 1; i <= COUNT; i++)); do
	echo "# pass $i/$COUNT" >&2
	if [[ " $MODES " == *" runtime-trace "* ]]; then
		echo "# plain runtime-trace" >&2
		echo "plain $i runtime-trace $(measure plain runtime-trace)" >>"$raw"
		echo "plain $i untraced $(measure plain untraced)" >>"$raw"
	fi
	for set in $SETS; do
		for ((j = 0; j < ${#modes[@]}; j++)); do
			m=${modes[(i + j) % ${#modes[@]}]}
			[[ -z $m || $m == runtime-trace ]] && continue
			[[ -n ${failed["$set $m"]:-} ]] && continue
			echo "# $set $m" >&2
			result=$(measure "$set" "$m")
			[[ $result == "- "* ]] && failed["$set $m"]=1
			echo "$set $i $m $result" >>"$raw"
		done
	done
done

echo "raw results: $raw"
echo "kernel $(uname -r), $(nproc) cpus: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bpftrace: $(bpftrace --version) (host), $([[ -x $SID/usr/bin/bpftrace ]] && chroot "$SID" bpftrace --version || echo none) (sid)"
echo "wrk -t2 -c8 -d${DURATION}s, COUNT=$COUNT"
for set in $SETS; do
	echo "$set: $("$tool" list "$OUT/jsonapi-$set" | grep -c ' exit__') exit probes, $("$tool" list "$OUT/jsonapi-$set" | grep -c ' entry__') entry probes"
done
echo
# The median requests/s per build and mode, and the runs that failed.
awk -v modes="untraced ${modes[*]}" '
$4 == "-" { why[$1 " " $3] = substr($0, index($0, "- ") + 2); next }
{ v[$1 " " $3] = v[$1 " " $3] " " $4; seen[$1] = 1; if (!($1 in order)) { order[$1] = ++n; names[n] = $1 } }
function median(list,    a, m, i, j, t) {
	m = split(list, a, " ")
	for (i = 2; i <= m; i++) {
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]
		a[j + 1] = t
	}
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	k = split(modes, ms, " ")
	printf "%-8s", "req/s"
	for (i = 1; i <= k; i++) if (!(ms[i] in dup)) { dup[ms[i]] = 1; cols[++c] = ms[i]; printf " %10s", ms[i] }
	print ""
	for (s = 1; s <= n; s++) {
		printf "%-8s", names[s]
		for (i = 1; i <= c; i++) {
			key = names[s] " " cols[i]
			printf " %10s", (key in v) ? sprintf("%.0f", median(v[key])) : "-"
		}
		print ""
	}
	for (key in why) printf "%s: %s\n", key, why[key]
}' "$raw"
