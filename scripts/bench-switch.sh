#!/usr/bin/env bash
# bench-switch.sh measures switching every function of a large running
# program to its traced copy (sites: switch) and back: Caddy v2.11.9
# (scripts/testdata/caddy) built with every function of every package
# ("...") under sites: switch, serving HTTP under load (LOADERS curl
# loops against a Caddyfile's "respond" site) while
#
#   switch    usdt-toolexec switch -v -p PID '*' switches every function
#             that can be, then, on SIGINT, switches them back
#   trace     usdt-toolexec trace -v -stats -p PID switches the functions
#             it traces (every probe), then, on SIGINT, switches them back
#
# each RUNS times, alternating. It prints what each says: the functions
# switched, the time the switch took in all, the number of stops of the
# program, the longest and where its time went; and the time switching
# back took. The program must answer every request the loaders made, and
# the same as plain.
#
# With BASE=REV, a third tool, REV's usdt-toolexec switch (built from
# the git revision REV), switches the same process in each run too, before
# this tree's switch on odd runs and after it on even ones: the two
# compared side by side.
#
# Environment: RUNS=5, LOADERS=2, BASE=, OUT= (a new temp dir if empty;
# the Go build cache is the user's, so a second run builds nothing).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
LOADERS=${LOADERS:-2}
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod USDT_RULES=
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-switch.XXXXXX")}
mkdir -p "$OUT/bin"
# With the tests' identity of the wrapper (internal/testing/wrapperid):
# a change to the tracer alone leaves Caddy's build cached.
go build "$(go run ./internal/testing/wrapperid/cmd/wrapperid)" -o "$OUT/bin/" ./cmd/usdt-toolexec
UT=$OUT/bin/usdt-toolexec
if [ -n "${BASE:-}" ]; then
	rm -rf "$OUT/base"
	mkdir -p "$OUT/base" "$OUT/bin-base"
	git archive "$BASE" | tar -x -C "$OUT/base"
	# Only switches: it builds nothing.
	(cd "$OUT/base" && go build -o "$OUT/bin-base/" ./cmd/usdt-toolexec)
fi

rm -rf "$OUT/caddy"
cp -r scripts/testdata/caddy "$OUT/caddy"
chmod -R u+w "$OUT/caddy"
(cd "$OUT/caddy" && go mod download)
printf 'provider: cd\nrules:\n  - package: "..."\n    sites: switch\n' >"$OUT/switch.yml"
echo "building Caddy with sites: switch on every package (\"...\")"
t0=$(date +%s)
(cd "$OUT/caddy" && go build -toolexec="$UT -rules $OUT/switch.yml" -o "$OUT/caddy-switch" . 2>"$OUT/build.log")
echo "built in $(($(date +%s) - t0)) s; $(grep -c 'no traced copy' "$OUT/build.log" || true) functions without a copy"
"$UT" list -switch "$OUT/caddy-switch" >"$OUT/list.txt" || true
echo "list -switch: $(grep -c ' yes$' "$OUT/list.txt") functions can be switched, $(grep -c ' no: ' "$OUT/list.txt") cannot"

port=$((20000 + RANDOM % 20000))
printf 'http://127.0.0.1:%d {\n\trespond "hello"\n}\n' "$port" >"$OUT/Caddyfile"
"$OUT/caddy-switch" run --adapter caddyfile --config "$OUT/Caddyfile" >"$OUT/caddy.log" 2>&1 &
caddy=$!
loaders=()
cleanup() {
	kill "${loaders[@]}" 2>/dev/null || true
	kill "$caddy" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 50); do
	curl -fs "http://127.0.0.1:$port/" >/dev/null && break
	sleep 0.2
done
for i in $(seq "$LOADERS"); do
	(
		ok=0 bad=0
		trap 'echo "$ok $bad" >"$OUT/load-$i"; exit 0' TERM
		while :; do
			if [ "$(curl -fs "http://127.0.0.1:$port/")" = hello ]; then
				ok=$((ok + 1))
			else
				bad=$((bad + 1))
			fi
		done
	) &
	loaders+=($!)
done
sleep 1

# run TOOL ARGS...: starts it, waits for it to say it switched, lets it
# hold the switches a second, interrupts it, and prints what it said,
# and when it said it switched, from its start (reading the binary and
# planning the switches included).
run() {
	local log=$OUT/run.log pid t0
	t0=$(date +%s%N)
	"$@" >/dev/null 2>"$log" &
	pid=$!
	for _ in $(seq 3000); do
		grep -q 'switched.*functions of process\|functions of process.*switched' "$log" && break
		sleep 0.02
	done
	echo "switched $((($(date +%s%N) - t0) / 1000000)) ms after its start"
	sleep 1
	local t0=$SECONDS
	kill -INT "$pid"
	wait "$pid" || true
	grep -E 'switched|stops' "$log" | grep -v 'stays as compiled' || cat "$log"
	echo "ended $((SECONDS - t0)) s after its interrupt"
}

base() {
	[ -n "${BASE:-}" ] || return 0
	echo "--- run $r: switch at $BASE"
	run "$OUT/bin-base/usdt-toolexec" switch -v -p "$caddy" '*' | grep -v ' switched to '
}
for r in $(seq "$RUNS"); do
	[ $((r % 2)) -eq 1 ] && base
	echo "--- run $r: switch"
	run "$UT" switch -v -p "$caddy" '*' | grep -v ' switched to '
	[ $((r % 2)) -eq 0 ] && base
	echo "--- run $r: trace -stats"
	run "$UT" trace -v -stats -p "$caddy"
done

kill -TERM "${loaders[@]}"
wait "${loaders[@]}" 2>/dev/null || true
loaders=()
ok=0 bad=0
for i in $(seq "$LOADERS"); do
	read -r a b <"$OUT/load-$i"
	ok=$((ok + a)) bad=$((bad + b))
done
echo "requests answered \"hello\": $ok; otherwise: $bad"
kill -0 "$caddy" || {
	echo "Caddy died:"
	tail -20 "$OUT/caddy.log"
	exit 1
}
[ "$bad" = 0 ]
