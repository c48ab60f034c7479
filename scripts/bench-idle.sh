#!/usr/bin/env bash
# bench-idle.sh measures what a trace that stays on costs while its
# program does nothing: the JSON API server (scripts/testdata/jsonapi,
# every function of net/http probed, the default sites) started under
# `usdt-toolexec trace -transport ring MODE -- jsonapi` and sent no
# request. After SETTLE s, trace's CPU time over DURATION s, from its
# /proc/PID/stat (utime + stime), as % of a CPU. In COUNT passes, each of
# these modes:
#
#   stats    -stats: the program counts the calls in its own memory
#   otlp     -otlp to a port where nothing listens (an idle program
#            sends nothing)
#   sampled  -otlp ... -sample 0.01 -metrics 127.0.0.1:0: a service's
#            trace that stays on (issue 52)
#
# With BASE=REV, REV's tracer runs too, in the same passes, its turn and
# this tree's alternating: the server is the same binary, built by this
# tree's wrapper (the ring's layout must be the same). It prints the
# median % of each tool and mode, and for BASE their ratio.
#
# Environment: COUNT=3, DURATION=10, SETTLE=3, MODES="stats otlp
# sampled", BASE=, OUT= (a new temp dir if empty).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNT=${COUNT:-3}
DURATION=${DURATION:-10}
SETTLE=${SETTLE:-3}
MODES=${MODES:-stats otlp sampled}
OUT=${OUT:-$(mktemp -d /tmp/usdt-idle-XXXXXX)}
mkdir -p "$OUT/tree"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

build_jsonapi "$OUT/tree" "$OUT"
tools=(tree)
if [ -n "${BASE:-}" ]; then
	rm -rf "$OUT/base-src"
	mkdir -p "$OUT/base-src" "$OUT/base"
	git archive "$BASE" | tar -x -C "$OUT/base-src"
	(cd "$OUT/base-src" && go build -o "$OUT/base/" ./cmd/usdt-toolexec ./cmd/usdt-export)
	tools=(tree base)
fi
hz=$(getconf CLK_TCK)

# run TOOL MODE prints trace's CPU over DURATION s as % of a CPU.
run() {
	local log=$OUT/$1.$2.txt args top pid a b
	case $2 in
	stats) args=(-stats) ;;
	otlp) args=(-otlp http://127.0.0.1:9) ;;
	sampled) args=(-otlp http://127.0.0.1:9 -sample 0.01 -metrics 127.0.0.1:0) ;;
	*)
		echo "MODES: unknown mode $2" >&2
		exit 2
		;;
	esac
	"$OUT/$1/usdt-toolexec" trace -transport ring "${args[@]}" -- "$OUT/jsonapi" >"$log" 2>&1 &
	top=$!
	if [ -z "$(listening_addr "$log" 30)" ]; then
		echo "$1 $2: the server did not say where it listens in 30 s:" >&2
		cat "$log" >&2
		kill -KILL "$top" 2>/dev/null || true
		exit 1
	fi
	sleep "$SETTLE"
	# trace runs usdt-export, as a child or in its own place.
	pid=$(pgrep -P "$top" -f usdt-export | head -1 || true)
	pid=${pid:-$top}
	a=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	sleep "$DURATION"
	b=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	kill -INT "$top"
	pkill -TERM -f "^$OUT/jsonapi" || true
	wait "$top" 2>/dev/null || true
	awk -v a="$a" -v b="$b" -v hz="$hz" -v d="$DURATION" 'BEGIN { printf "%.1f\n", (b - a) * 100 / hz / d }'
}

: >"$OUT/results.txt"
read -ra modes <<<"$MODES"
for pass in $(seq "$COUNT"); do
	for t in $(turns "$pass" "${tools[@]}"); do
		for m in "${modes[@]}"; do
			echo "$t $m $(run "$t" "$m")" | tee -a "$OUT/results.txt"
		done
	done
done

echo "tool mode %-of-a-CPU (medians of $COUNT runs of ${DURATION}s, $(uname -r), $(go env GOVERSION), $(nproc) CPUs)"
awk "$SORTMED"'
	{ k = $1 " " $2; n[k]++; v[k, n[k]] = $3; if (!(k in seen)) { seen[k] = 1; order[++c] = k } }
	END {
		for (k in n) { for (i = 1; i <= n[k]; i++) a[i] = v[k, i]; med[k] = sortmed(a, n[k]); l[k] = lo; h[k] = hi }
		for (i = 1; i <= c; i++) {
			k = order[i]
			split(k, f, " ")
			r = ""
			if (f[1] == "tree" && ("base " f[2]) in med && med["base " f[2]] > 0)
				r = sprintf(" %.2fx of base", med[k] / med["base " f[2]])
			printf "%s %.1f%% (runs %.1f-%.1f)%s\n", k, med[k], l[k], h[k], r
		}
	}' "$OUT/results.txt"
echo "results in $OUT"
