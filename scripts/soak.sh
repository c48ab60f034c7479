#!/usr/bin/env bash
# soak.sh measures whether a trace that stays on keeps its memory: the
# JSON API server (scripts/testdata/jsonapi, every function of net/http
# probed) under wrk's constant load (2 threads, CONNS connections) for
# DURATION seconds, traced through the ring with every event printed as
# JSON to /dev/null (MODE=events, the default) or counted (MODE=stats).
# It samples trace's resident memory (VmRSS of usdt-toolexec trace, the
# process that reads the ring) every 10 s and prints each sample, then
# the RSS at 60 s, at the end, their ratio (the goal: at most 1.10), and
# the requests/s wrk got.
#
# Environment: DURATION=600, CONNS=8, MODE=events, OUT= (a new temp dir
# if empty). Needs wrk (installed with apt-get if missing).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
DURATION=${DURATION:-600}
CONNS=${CONNS:-8}
MODE=${MODE:-events}
OUT=${OUT:-$(mktemp -d /tmp/usdt-soak-XXXXXX)}
mkdir -p "$OUT"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

build_jsonapi "$OUT" "$OUT"
tool=$OUT/usdt-toolexec
if ! command -v wrk >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

case $MODE in
events) args=(-json) ;;
stats) args=(-stats) ;;
*)
	echo "MODE=$MODE: want events or stats" >&2
	exit 2
	;;
esac
log=$OUT/server.txt
"$tool" trace -transport ring "${args[@]}" -- "$OUT/jsonapi" >/dev/null 2>"$log" &
trace=$!
addr=$(listening_addr "$log" 10)
wrk -t2 -c"$CONNS" -d"${DURATION}s" "http://$addr/items/42" >"$OUT/wrk.txt" &
load=$!

rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$trace/status"; }
at60=
: >"$OUT/rss.txt"
for ((t = 10; t <= DURATION; t += 10)); do
	sleep 10
	r=$(rss)
	echo "$t s: trace's RSS $r KiB" | tee -a "$OUT/rss.txt"
	[ "$t" -eq 60 ] && at60=$r
done
end=$(rss)
wait "$load" || true
# As Ctrl-C does to the foreground job: trace and the server.
kill -INT "$trace"
pkill -INT -f "^$OUT/jsonapi" || true
wait "$trace" || true
echo "trace's RSS at 60 s: ${at60:-?} KiB, at the end ($DURATION s): $end KiB, end/60s: $(echo "scale=3; $end / ${at60:-$end}" | bc)"
echo "requests/s: $(awk '/^Requests\/sec:/ { print $2 }' "$OUT/wrk.txt")"
echo "results in $OUT"
