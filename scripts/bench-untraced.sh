#!/usr/bin/env bash
# bench-untraced.sh measures what probes cost while nobody traces: each
# workload built plain and with every function of its library probed
# (this tree's usdt-toolexec, default rules: functions the compiler
# inlines stay as written), run in turn, plain first on odd passes and
# last on even ones, COUNT passes. Per workload it prints each
# build's median and the probed/plain and notes/plain ratios of the medians, in the
# workload's own unit (higher is better for op/s and req/s, lower for
# ns/op and seconds).
#
#   bbolt      go.etcd.io/bbolt v1.5.0, every function of go.etcd.io/bbolt/...
#              probed: `bbolt bench --count 300000 --batch-size 1000`,
#              its sequential writes and reads (ns/op)
#   jsonnet    github.com/google/go-jsonnet v0.21.0, every function of
#              github.com/google/go-jsonnet/... probed: cmd/jsonnet
#              evaluating 20 times a snippet that makes about 1.2 M
#              calls (seconds, whole process)
#   jsonapi    scripts/testdata/jsonapi, every function of net/http
#              probed: wrk, 8 connections, DURATION s (req/s)
#   gin        scripts/testdata/ginapi (gin v1.12.0), every function of
#              github.com/gin-gonic/gin/... probed: wrk, 4 connections,
#              DURATION s (req/s)
#
# Each workload has four builds: plain, probed (the probes code in the
# functions, the default), notes (the same rules with sites: notes:
# the functions as compiled, the probes notes on their own code) and
# switch (sites: switch: the functions as compiled, a traced copy of
# each beside them, which nothing switches to here).
#
# Environment: COUNT=5, DURATION=5, WORKLOADS="bbolt jsonnet jsonapi gin",
# OUT= (a new temp dir if empty). Needs wrk (installed with apt-get if
# missing) for the servers. Run it on an otherwise idle machine.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNT=${COUNT:-5}
DURATION=${DURATION:-5}
WORKLOADS=${WORKLOADS:-bbolt jsonnet jsonapi gin}
OUT=${OUT:-$(mktemp -d /tmp/usdt-bench-untraced-XXXXXX)}
mkdir -p "$OUT"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

go build -o "$OUT/" ./cmd/usdt-toolexec
tool=$OUT/usdt-toolexec

# build NAME DIR TARGET PACKAGES builds $OUT/NAME.plain, $OUT/NAME.probed,
# $OUT/NAME.notes and $OUT/NAME.switch.
build() {
	printf 'rules:\n  - package: "%s"\n' "$4" >"$OUT/$1.yml"
	printf 'rules:\n  - package: "%s"\n    sites: notes\n' "$4" >"$OUT/$1.notes.yml"
	printf 'rules:\n  - package: "%s"\n    sites: switch\n' "$4" >"$OUT/$1.switch.yml"
	(cd "$2" && go build -o "$OUT/$1.plain" "$3")
	(cd "$2" && go build -toolexec="$tool -rules $OUT/$1.yml" -o "$OUT/$1.probed" "$3")
	(cd "$2" && go build -toolexec="$tool -rules $OUT/$1.notes.yml" -o "$OUT/$1.notes" "$3")
	(cd "$2" && go build -toolexec="$tool -rules $OUT/$1.switch.yml" -o "$OUT/$1.switch" "$3" 2>"$OUT/$1.switch.log")
}

for w in $WORKLOADS; do
	case $w in
	bbolt)
		fetch_module go.etcd.io/bbolt@v1.5.0 "$OUT/bbolt"
		build bbolt "$OUT/bbolt" ./cmd/bbolt 'go.etcd.io/bbolt/...'
		;;
	jsonnet)
		fetch_module github.com/google/go-jsonnet@v0.21.0 "$OUT/jsonnet"
		build jsonnet "$OUT/jsonnet" ./cmd/jsonnet 'github.com/google/go-jsonnet/...'
		cp scripts/testdata/jsonnet/work.jsonnet "$OUT/work.jsonnet"
		;;
	jsonapi)
		build jsonapi scripts/testdata/jsonapi . net/http
		;;
	gin)
		build gin scripts/testdata/ginapi . 'github.com/gin-gonic/gin/...'
		;;
	*)
		echo "unknown workload $w" >&2
		exit 2
		;;
	esac
done
case " $WORKLOADS " in *" jsonapi "* | *" gin "*)
	if ! command -v wrk >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
	fi
	;;
esac

# serve BIN CONNS prints the requests/s wrk gets from the server BIN.
serve() {
	local log=$OUT/server.txt server addr
	: >"$log"
	"$1" >>"$log" 2>&1 &
	server=$!
	addr=$(listening_addr "$log" 10)
	wrk -t2 -c"$2" -d"${DURATION}s" "http://$addr/items/42" | awk '/^Requests\/sec:/ { print $2 }'
	kill "$server"
	wait "$server" 2>/dev/null || true
}

# run WORKLOAD BUILD appends "metric value" lines for one run.
run() {
	local bin=$OUT/$1.$2 start end
	case $1 in
	bbolt)
		rm -f "$OUT/bench.db"
		# bench rounds ns/op to whole ns, a tenth of a read: the
		# operations and their time give it exactly.
		"$bin" bench --count 300000 --batch-size 1000 --path "$OUT/bench.db" |
			awk 'function ns(ops, d) { sub(/\(ops\)/, "", ops); if (d ~ /ms$/) { sub(/ms$/, "", d); d *= 1e6 } else if (d ~ /µs$/) { sub(/µs$/, "", d); d *= 1e3 } else { sub(/s$/, "", d); d *= 1e9 } return sprintf("%.2f", d / ops) }
				/^# Write/ { print "write-ns/op", ns($3, $4) } /^# Read/ { print "read-ns/op", ns($3, $4) }'
		rm -f "$OUT/bench.db"
		;;
	jsonnet)
		start=$(date +%s.%N)
		"$bin" "$OUT/work.jsonnet" >/dev/null
		end=$(date +%s.%N)
		echo "seconds $(echo "$end - $start" | bc)"
		;;
	jsonapi) echo "req/s $(serve "$bin" 8)" ;;
	gin) echo "req/s $(serve "$bin" 4)" ;;
	esac
}

: >"$OUT/results.txt"
for pass in $(seq "$COUNT"); do
	for w in $WORKLOADS; do
		for b in $(turns "$pass" plain probed notes switch); do
			run "$w" "$b" | while read -r metric value; do
				echo "$w $metric $b $value" >>"$OUT/results.txt"
			done
		done
	done
done

echo "workload metric plain probed notes switch probed/plain notes/plain switch/plain (medians of $COUNT, $(uname -r), $(go env GOVERSION))"
awk '
function median(s,    n, a, i, j, t) {
	n = split(s, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ key = $1 " " $2; v[key, $3] = v[key, $3] " " $4; keys[key] = 1 }
END {
	for (k in keys) {
		p = median(v[k, "plain"]); q = median(v[k, "probed"]); n = median(v[k, "notes"]); s = median(v[k, "switch"])
		printf "%s %s %s %s %s %.3f %.3f %.3f\n", k, p, q, n, s, (p ? q / p : 0), (p ? n / p : 0), (p ? s / p : 0)
	}
}' "$OUT/results.txt" | sort
