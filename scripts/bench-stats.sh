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
# With ALTERNATE=N, it measures instead one server per build and tracer
# mode: N pairs of windows of DURATION seconds, one untraced and one
# traced by a tracer attached for that window only (-p, ended by SIGINT,
# which leaves the server as it found it), the untraced one first in
# odd pairs and second in even ones, and prints each pair's ratio, their
# median and quartiles. Servers started anew run at speeds that
# differ by up to 15 % on this machine (their heaps' layout), more than
# the few per cent a counting tracer costs; one server's windows differ
# by less.
#
# A tracer that has not attached in ATTACH_TIMEOUT seconds (BEGIN fired
# for bpftrace, -v's "attached" for trace) or fails is reported as such,
# and not tried again on that build; every wait and every load is bounded
# in time. The server ends each run
# by being killed, and the tracers must end with it (-p).
#
# Environment:
#   COUNT=3                passes
#   ALTERNATE=             windows per server, untraced then traced
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
	attach "$set" "$mode" "$server" || {
		echo "- $why"
		stop "$server"
		return
	}
	load "$addr"
	local rps=$loaded requests=$served
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

# load ADDR drives the server at ADDR for DURATION seconds: its
# requests/s in loaded, the requests in served.
load() {
	timeout $((DURATION + 30)) wrk -t2 -c8 -d"${DURATION}s" "http://$1/items/42" >"$OUT/wrk.txt" 2>&1 || true
	loaded=$(awk '$1 == "Requests/sec:" { print $2 }' "$OUT/wrk.txt")
	served=$(awk '/requests in/ { print $1 }' "$OUT/wrk.txt")
}

# attach SET MODE PID starts MODE's tracer on process PID (of build SET),
# its pid in tracer (empty untraced), and waits until it has attached:
# note says how long it took. Else it sets why, stops the tracer and
# fails.
attach() {
	local set=$1 mode=$2 server=$3 log=$OUT/tracer.txt
	tracer=
	: >"$log"
	case $mode in
	untraced | runtime-trace) ;;
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
	note=
	[[ -z $tracer ]] && return 0
	local t0=$SECONDS rc=0
	wait_for "$log" '^attached|^usdt-toolexec trace: attached' "$tracer" || rc=$?
	if ((rc != 0)); then
		if ((rc == 2)); then
			why="not attached in ${ATTACH_TIMEOUT} s"
		else
			# bpftrace warns before it fails: the error is the line.
			why="failed: $({ grep -m1 ERROR "$log" || grep -m1 -iE 'error|fail' "$log"; } | cut -c1-120)"
		fi
		stop "$tracer" INT
		return 1
	fi
	note="attached in $((SECONDS - t0)) s"
}

# alternate SET MODE: one server of build SET, ALTERNATE pairs of
# windows untraced and traced as MODE; a line a pair:
# "SET MODE untraced-rps traced-rps ratio", or "SET MODE - why".
alternate() {
	local set=$1 mode=$2 bin=$OUT/jsonapi-$1 addr i u t
	: >"$OUT/server.txt"
	"$bin" >>"$OUT/server.txt" 2>&1 &
	local server=$!
	if ! wait_for "$OUT/server.txt" '^listening on' "$server"; then
		echo "$set $mode - the server did not start: $(head -c 200 "$OUT/server.txt")"
		stop "$server"
		return
	fi
	addr=$(awk '/^listening on/ { print $3 }' "$OUT/server.txt")
	load "$addr" # its first window warms it up
	for ((i = 1; i <= ALTERNATE; i++)); do
		# Untraced first, then traced first, each window after a
		# second's rest: on this machine a window that follows another
		# at once runs up to 8 % slower than one after a pause.
		u=
		if ((i % 2)); then
			sleep 1
			load "$addr"
			u=$loaded
		fi
		if ! attach "$set" "$mode" "$server"; then
			echo "$set $mode - $why"
			break
		fi
		sleep 1
		load "$addr"
		t=$loaded
		stop "$tracer" INT
		if [[ -z $u ]]; then
			sleep 1
			load "$addr"
			u=$loaded
		fi
		echo "$set $mode $u $t $(awk -v u="$u" -v t="$t" 'BEGIN { printf "%.3f", t / u }')"
	done
	stop "$server"
}

modes=($MODES)
if [[ " $MODES " == *" bt-0.27 "* && ! -x $SID/usr/bin/bpftrace ]]; then
	echo "# no sid chroot at $SID (scripts/sid-chroot.sh): no bt-0.27" >&2
	modes=("${modes[@]/bt-0.27/}")
fi
# sorted(list, a) splits the numbers of list into a, sorted, and
# returns how many there are: for the awk programs below.
sorted='
function sorted(list, a,    m, i, j, x) {
	m = split(list, a, " ")
	for (i = 2; i <= m; i++) {
		x = a[i]
		for (j = i - 1; j >= 1 && a[j] + 0 > x + 0; j--) a[j + 1] = a[j]
		a[j + 1] = x
	}
	return m
}'
raw=$OUT/raw.txt
: >"$raw"
if [[ -n ${ALTERNATE:-} ]]; then
	for set in $SETS; do
		for m in "${modes[@]}"; do
			[[ -z $m || $m == untraced || $m == runtime-trace ]] && continue
			echo "# $set $m, $ALTERNATE pairs of windows" >&2
			alternate "$set" "$m" | tee -a "$raw" >&2
		done
	done
	echo "raw results: $raw"
	echo "kernel $(uname -r), $(nproc) cpus: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "wrk -t2 -c8 -d${DURATION}s, ALTERNATE=$ALTERNATE: one server a row, windows untraced and traced in turn"
	# Each row: each traced window's requests/s against the untraced one
	# of its pair, the median of those ratios and its quartiles.
	awk "$sorted"'
	$3 == "-" { print $1, $2 ": " substr($0, index($0, "- ") + 2); next }
	{ k = $1 " " $2; r[k] = r[k] " " $5; u[k] = u[k] " " $3; t[k] = t[k] " " $4; if (!(k in seen)) { seen[k] = 1; keys[++n] = k } }
	function q(a, m, f,    x, i) { x = 1 + (m - 1) * f; i = int(x); return i < m ? a[i] + (x - i) * (a[i + 1] - a[i]) : a[m] }
	END {
		printf "%-18s %5s %10s %10s %8s %15s %s\n", "build mode", "pairs", "untraced", "traced", "ratio", "quartiles", "ratios"
		for (i = 1; i <= n; i++) {
			m = sorted(r[keys[i]], a); sorted(u[keys[i]], b); sorted(t[keys[i]], c)
			printf "%-18s %5d %10.0f %10.0f %7.3fx %7.3f-%.3f %s\n", keys[i], m, q(b, m, 0.5), q(c, m, 0.5), q(a, m, 0.5), q(a, m, 0.25), q(a, m, 0.75), r[keys[i]]
		}
	}' "$raw"
	exit 0
fi
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
awk -v modes="untraced ${modes[*]}" "$sorted"'
$4 == "-" { why[$1 " " $3] = substr($0, index($0, "- ") + 2); next }
{ v[$1 " " $3] = v[$1 " " $3] " " $4; seen[$1] = 1; if (!($1 in order)) { order[$1] = ++n; names[n] = $1 } }
function median(list,    a, m) {
	m = sorted(list, a)
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
