#!/usr/bin/env bash
# bench-block.sh measures -block (issue 52): bbolt v1.5.0's tests (the
# package go.etcd.io/bbolt's, those TESTRUN matches, -test.short: by
# default its TestDB_ tests, 2.9 M calls; all of them make 66 M, whose
# spans the in-memory Jaeger cannot hold here), built with every
# function of go.etcd.io/bbolt/... probed, run untraced and then under
# `usdt-toolexec trace -transport ring -otlp URL`, its spans sent to
# Jaeger (the one the end-to-end tests use, scripts/jaeger.sh), without
# and with -block BLOCK. For each run it prints the tests' wall time,
# what trace said it lost (events, spans) and whether Jaeger has the
# run's service; then each mode's median time and its ratio to
# untraced. The modes take turns, the order reversed every second pass.
#
# TESTSKIP's tests are left out: TestDB_Open_InitialMmapSize asserts
# that a write takes less than 5 s, which the blocking trace's pace
# (12x untraced) breaks: -block slows the program to trace's pace.
#
# Environment: COUNT=3, BLOCK=1s, TESTRUN=^TestDB_ (a -test.run
# pattern; every test if empty), TESTSKIP=TestDB_Open_InitialMmapSize,
# MODES="untraced dropping blocking", OUT= (a new temp dir if empty).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNT=${COUNT:-3}
BLOCK=${BLOCK:-1s}
TESTRUN=${TESTRUN-^TestDB_}
TESTSKIP=${TESTSKIP-TestDB_Open_InitialMmapSize}
MODES=${MODES:-untraced dropping blocking}
OUT=${OUT:-$(mktemp -d /tmp/usdt-bench-block-XXXXXX)}
mkdir -p "$OUT"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

# The wrapper with the tests' identity, so that a change to the tracer
# alone leaves the instrumented build cached (internal/testing/wrapperid).
go build -o "$OUT/" ./cmd/usdt-toolexec ./cmd/usdt-export
mkdir -p "$OUT/wrapper"
go build "$(go run ./internal/testing/wrapperid/cmd/wrapperid)" -o "$OUT/wrapper/" ./cmd/usdt-toolexec
tool=$OUT/usdt-toolexec
fetch_module go.etcd.io/bbolt@v1.5.0 "$OUT/bbolt"
printf 'rules:\n  - package: "go.etcd.io/bbolt/..."\n' >"$OUT/bbolt.yml"
(cd "$OUT/bbolt" && go test -c -toolexec="$OUT/wrapper/usdt-toolexec -rules $OUT/bbolt.yml" -o "$OUT/bbolt.test" .)

start_jaeger "$OUT" 16706 16705 4338
trap 'kill $jaegerpid 2>/dev/null || true' EXIT

args=(-test.short -test.count=1)
[ -n "$TESTRUN" ] && args+=("-test.run=$TESTRUN")
[ -n "$TESTSKIP" ] && args+=("-test.skip=$TESTSKIP")

# run MODE PASS runs the tests under MODE and prints "MODE seconds lost
# spans-lost in-Jaeger", keeping trace's output in
# $OUT/MODE.PASS.txt.
run() {
	local log=$OUT/$1.$2.txt service=bbolt-$1-$2 start end cmd lost slost held
	case $1 in
	untraced) cmd=("$OUT/bbolt.test") ;;
	dropping) cmd=("$tool" trace -transport ring -otlp http://127.0.0.1:4338 -service "$service" -- "$OUT/bbolt.test") ;;
	blocking) cmd=("$tool" trace -transport ring -block "$BLOCK" -otlp http://127.0.0.1:4338 -service "$service" -- "$OUT/bbolt.test") ;;
	*)
		echo "MODES: unknown mode $1" >&2
		exit 2
		;;
	esac
	start=$(date +%s.%N)
	(cd "$OUT/bbolt" && "${cmd[@]}" "${args[@]}") >"$log" 2>&1 || {
		echo "$1: the tests failed:" >&2
		tail -20 "$log" >&2
		exit 1
	}
	end=$(date +%s.%N)
	lost=$(sed -n 's/.*lost \([0-9]*\) events.*/\1/p' "$log" | awk '{ n += $1 } END { print n + 0 }')
	slost=$(sed -n 's/.*lost \([0-9]*\) spans.*/\1/p; s/.*: \([0-9]*\) spans not sent.*/\1/p' "$log" | awk '{ n += $1 } END { print n + 0 }')
	held=-
	if [ "$1" != untraced ]; then
		# Whether spans arrived: Jaeger lists the run's service. (A
		# count would have to fetch the traces, some of a test's whole
		# run, hundreds of MB of JSON; trace's own counts of what it
		# lost say whether all arrived.)
		held=no
		for _ in $(seq 30); do
			curl -fsS http://127.0.0.1:16706/api/services | grep -q "\"$service\"" && held=yes && break
			sleep 2
		done
	fi
	echo "$1 $(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }') $lost $slost $held"
}

: >"$OUT/results.txt"
read -ra modes <<<"$MODES"
for pass in $(seq "$COUNT"); do
	for m in $(turns "$pass" "${modes[@]}"); do
		run "$m" "$pass" | tee -a "$OUT/results.txt"
	done
done

echo "mode seconds ratio-to-untraced events-lost spans-lost (medians of $COUNT runs; -block $BLOCK; $(uname -r), $(go env GOVERSION), $(nproc) CPUs)"
awk "$SORTMED"'
	{ n[$1]++; v[$1, n[$1]] = $2; l[$1, n[$1]] = $3; s[$1, n[$1]] = $4; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
	END {
		for (m in n) {
			for (i = 1; i <= n[m]; i++) a[i] = v[m, i]
			med[m] = sortmed(a, n[m])
			for (i = 1; i <= n[m]; i++) a[i] = l[m, i]
			ml[m] = sortmed(a, n[m])
			for (i = 1; i <= n[m]; i++) a[i] = s[m, i]
			ms[m] = sortmed(a, n[m])
		}
		for (i = 1; i <= k; i++) {
			m = order[i]
			r = ("untraced" in med) && med["untraced"] > 0 ? sprintf("%.2f", med[m] / med["untraced"]) : "-"
			printf "%s %.2f %s %d %d\n", m, med[m], r, ml[m], ms[m]
		}
	}' "$OUT/results.txt"
echo "(each run: $OUT/results.txt; trace's output: $OUT/MODE.PASS.txt)"
