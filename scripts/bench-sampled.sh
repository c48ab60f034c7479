#!/usr/bin/env bash
# bench-sampled.sh measures what a trace that stays on costs a service: the
# JSON API server (scripts/testdata/jsonapi, every function of net/http
# probed, the default sites) under wrk (1 thread, CONNS connections,
# DURATION s a run), in COUNT passes of these runs, their order reversed
# on every second pass:
#
#   untraced  the server alone
#   stats     trace -transport ring -stats: every call counted in the
#             server's memory, no events
#   sampled   trace -transport ring -otlp URL -sample $SAMPLE -metrics
#             127.0.0.1:0: every call's events read and counted as
#             metrics, the sampled traces' spans sent to Jaeger (issue
#             52's goal: at least 0.8x of untraced at -sample 0.01)
#   spans     the same at -sample 1: every call a span (MODES adds it)
#   words     sampled with -values=false: no Go value read through the
#             arguments' pointers (MODES adds it)
#
# It prints the median requests/s of each mode and its ratio to
# untraced's, from the same passes, how many traces Jaeger holds, and for
# the traced modes what trace printed of its losses. Jaeger is the one the end-to-end tests use,
# built once per machine by scripts/jaeger.sh.
#
# Environment: COUNT=5, DURATION=10, CONNS=8, SAMPLE=0.01,
# MODES="untraced stats sampled", OUT= (a new temp dir if empty). Needs
# wrk (installed with apt-get if missing).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNT=${COUNT:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-8}
SAMPLE=${SAMPLE:-0.01}
MODES=${MODES:-untraced stats sampled}
OUT=${OUT:-$(mktemp -d /tmp/usdt-sampled-XXXXXX)}
mkdir -p "$OUT"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

build_jsonapi "$OUT" "$OUT"
tool=$OUT/usdt-toolexec
if ! command -v wrk >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
start_jaeger "$OUT" 16696 16695 4328
trap 'kill $jaegerpid 2>/dev/null || true' EXIT

# run MODE prints the requests/s wrk gets from the server under MODE, and
# keeps its output and trace's in $OUT/MODE.PASS.txt.
run() {
	local log=$OUT/$1.$2.txt cmd server addr
	case $1 in
	untraced) cmd=("$OUT/jsonapi") ;;
	stats) cmd=("$tool" trace -transport ring -stats -- "$OUT/jsonapi") ;;
	sampled) cmd=("$tool" trace -transport ring -otlp http://127.0.0.1:4328 -sample "$SAMPLE" -metrics 127.0.0.1:0 -- "$OUT/jsonapi") ;;
	spans) cmd=("$tool" trace -transport ring -otlp http://127.0.0.1:4328 -metrics 127.0.0.1:0 -- "$OUT/jsonapi") ;;
	words) cmd=("$tool" trace -transport ring -values=false -otlp http://127.0.0.1:4328 -sample "$SAMPLE" -metrics 127.0.0.1:0 -- "$OUT/jsonapi") ;;
	*)
		echo "MODES: unknown mode $1" >&2
		exit 2
		;;
	esac
	# The server says where it listens on stdout; trace's -stats table
	# and losses go there too.
	: >"$log"
	"${cmd[@]}" >"$log" 2>&1 &
	server=$!
	addr=$(listening_addr "$log" 30)
	if [ -z "$addr" ]; then
		echo "$1: the server did not say where it listens in 30 s:" >&2
		cat "$log" >&2
		kill -KILL "$server" 2>/dev/null || true
		exit 1
	fi
	wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://$addr/items/42" | awk '/^Requests\/sec:/ { print $2 }'
	# A background job ignores SIGINT, and so does the server trace
	# starts: trace is told to end as Ctrl-C tells it, the server by
	# SIGTERM.
	[ "$1" = untraced ] || kill -INT "$server"
	pkill -TERM -f "^$OUT/jsonapi" || true
	wait "$server" 2>/dev/null || true
}

: >"$OUT/results.txt"
read -ra modes <<<"$MODES"
for pass in $(seq "$COUNT"); do
	for m in $(turns "$pass" "${modes[@]}"); do
		echo "$m $(run "$m" "$pass")" | tee -a "$OUT/results.txt"
	done
done

# The sampled traces arrived: Jaeger's count of them, up to 9,999 (its
# query's limit is below the 10,000 traces it keeps), each trace one
# object with its "processes".
traces=$(curl -fsS 'http://127.0.0.1:16696/api/traces?service=jsonapi&limit=9999' | grep -o '"processes"' | wc -l || true)
echo "Jaeger holds $traces traces of jsonapi"
echo "mode req/s ratio-to-untraced (medians of $COUNT runs of ${DURATION}s, -sample $SAMPLE, $(uname -r), $(go env GOVERSION), $(nproc) CPUs)"
awk "$SORTMED"'
	{ n[$1]++; v[$1, n[$1]] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
	END {
		for (m in n) { for (i = 1; i <= n[m]; i++) a[i] = v[m, i]; med[m] = sortmed(a, n[m]); l[m] = lo; h[m] = hi }
		for (i = 1; i <= k; i++) {
			m = order[i]
			r = ("untraced" in med) && med["untraced"] > 0 ? sprintf("%.3f", med[m] / med["untraced"]) : "-"
			printf "%s %.0f %s (runs %.0f-%.0f)\n", m, med[m], r, l[m], h[m]
		}
	}' "$OUT/results.txt"
for m in "${modes[@]}"; do
	[ "$m" = untraced ] && continue
	echo "$m: what trace printed, last pass (its end):"
	grep -v '^listening on' "$OUT/$m.$COUNT.txt" | sed 's/^/  /' | tail -5
done
echo "results in $OUT"
