#!/usr/bin/env bash
# bench-auto.sh measures what automatic probes (usdt-toolexec with a rules
# file) cost per call while no tracer is attached. It builds the test
# binary of internal/testing/benchauto three times from the same source:
#
#   plain: CGO_ENABLED=0 go test -c
#   auto:  CGO_ENABLED=0 go test -c -toolexec="usdt-toolexec -rules internal/testing/benchauto/rules.yml"
#          (entry and exit probes on Work and Add: what a rule gives by default)
#   entry: the same with internal/testing/benchauto/rules-entry.yml (entry probes
#          only: no deferred call, no traced copy)
#
# It checks with `usdt-toolexec list` that Work and Add, and nothing else,
# got probes, saves the inlining decisions (-gcflags=-m=2) and the
# disassembly of the instrumented functions, then runs, COUNT times, every
# benchmark once in each binary as its own process, rotating which binary
# goes first. It prints the median ns/op per benchmark and binary, what the
# probes add per call and the ratio, the in-process paired figures, and
# benchstat tables.
#
# Environment:
#   COUNT=10        passes
#   BENCH=.         -bench regexp
#   BENCHTIME=      -benchtime (the testing default when empty)
#   BUILDS="plain auto entry"
#                   which binaries to build and run (plain is required)
#   OUT=            directory for binaries and raw results (a new temp dir
#                   if empty)
#   LDFLAGS=        -ldflags of every test binary, e.g. -funcalign=64 to see
#                   whether a difference is a code-placement effect
#   BENCHSTAT=auto  auto: benchstat from PATH, else
#                   `go run golang.org/x/perf/cmd/benchstat@latest`; 0: never
#
# One-binary equivalents, from the repository root:
#   go build -o /tmp/usdt-toolexec ./cmd/usdt-toolexec
#   CGO_ENABLED=0 go test -run='^$' -bench=. -count=10 ./internal/testing/benchauto
#   CGO_ENABLED=0 go test -toolexec="/tmp/usdt-toolexec -rules internal/testing/benchauto/rules.yml" -run='^$' -bench=. -count=10 ./internal/testing/benchauto
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
root=$PWD
COUNT=${COUNT:-10}
BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-}
BENCHSTAT=${BENCHSTAT:-auto}
LDFLAGS=${LDFLAGS:-}
read -r -a builds <<<"${BUILDS:-plain auto entry}"
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-auto.XXXXXX")}
mkdir -p "$OUT/bin"
bin="$OUT/bin"
pkg=./internal/testing/benchauto

declare -A rulesOf=([auto]=internal/testing/benchauto/rules.yml [entry]=internal/testing/benchauto/rules-entry.yml)
if [[ " ${builds[*]} " != *" plain "* ]]; then
	echo "BUILDS must include plain" >&2
	exit 1
fi

echo "# building usdt-toolexec and the test binaries (${builds[*]}) into $bin" >&2
go build -o "$bin/usdt-toolexec" ./cmd/usdt-toolexec
for b in "${builds[@]}"; do
	flags=()
	if [[ $b != plain ]]; then
		flags=(-toolexec="$bin/usdt-toolexec -rules $root/${rulesOf[$b]}")
	fi
	CGO_ENABLED=0 go test -c "${flags[@]}" -ldflags="$LDFLAGS" -o "$bin/$b.test" "$pkg"
	# The inlining decisions, as the compiler reports them (one more
	# compile of the package, with -m=2).
	CGO_ENABLED=0 go test -c "${flags[@]}" -gcflags=-m=2 -o /dev/null "$pkg" 2>&1 |
		grep -E '(inline|inlining call to) (Work|WorkRef|Add|AddNoinline)(_usdtTraced)?\b' >"$OUT/inline-$b.txt" || true
	go tool objdump -s 'benchauto\.(Work|WorkRef|Add|AddNoinline)(_usdtTraced)?$' "$bin/$b.test" >"$OUT/objdump-$b.txt"
done

# Which functions got probes: in the instrumented binaries exactly the
# entry (and exit) probes of Work and Add; in the plain one none.
echo "== probes (usdt-toolexec list)"
for b in "${builds[@]}"; do
	echo "-- $b"
	if [[ $b == plain ]]; then
		if "$bin/usdt-toolexec" list "$bin/plain.test" >/dev/null 2>&1; then
			echo "the plain test binary has USDT probes" >&2
			exit 1
		fi
		echo "(no USDT probes)"
		continue
	fi
	"$bin/usdt-toolexec" list "$bin/$b.test" | tee "$OUT/probes-$b.txt" | cut -c1-60
	want="entry__benchauto__Add entry__benchauto__Work"
	if [[ $b == auto ]]; then
		want="entry__benchauto__Add entry__benchauto__Work exit__benchauto__Add exit__benchauto__Work"
	fi
	got=$(awk 'NR > 1 { print $2 }' "$OUT/probes-$b.txt" | sort | xargs)
	if [[ $got != "$want" ]]; then
		echo "$b: probes are [$got], want [$want]" >&2
		exit 1
	fi
done
echo
echo "== inlining (go test -c -gcflags=-m=2)"
for b in "${builds[@]}"; do
	echo "-- $b"
	sed -E 's/ as: .*//' "$OUT/inline-$b.txt" | sort -u
done
echo
echo "disassembly of Work, WorkRef, Add, AddNoinline: $OUT/objdump-{$(
	IFS=,
	echo "${builds[*]}"
)}.txt"
echo

args=(-test.run='^$' -test.count=1 -test.benchmem)
if [[ -n $BENCHTIME ]]; then
	args+=(-test.benchtime="$BENCHTIME")
fi
for b in "${builds[@]}"; do
	: >"$OUT/$b.txt"
done
mapfile -t benches < <(cd internal/testing/benchauto && "$bin/plain.test" -test.list="$BENCH" | grep '^Benchmark')
if ((${#benches[@]} == 0)); then
	echo "no benchmark matches BENCH=$BENCH" >&2
	exit 1
fi
n=${#builds[@]}
for ((i = 1; i <= COUNT; i++)); do
	echo "# pass $i/$COUNT" >&2
	for ((j = 0; j < ${#benches[@]}; j++)); do
		# Rotate which binary goes first.
		for ((k = 0; k < n; k++)); do
			b=${builds[(i + j + k) % n]}
			# The test binary runs in its package directory, as go
			# test would run it.
			(cd internal/testing/benchauto && "$bin/$b.test" "${args[@]}" -test.bench="^${benches[j]}\$") >>"$OUT/$b.txt"
		done
	done
done

files=()
for b in "${builds[@]}"; do
	files+=("$OUT/$b.txt")
done
echo "raw results: ${files[*]}"
echo "cpu: $(grep -m1 '^cpu:' "$OUT/plain.txt" | cut -c6- || echo '?'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# The summary. ns/op is the median over the passes; "+ns" is the median in
# a build minus the median of the same benchmark in the plain build.
# The builds in which Add is still inlined (all, since the split).
inlined=""
for b in "${builds[@]}"; do
	if grep -q 'can inline Add with' "$OUT/inline-$b.txt"; then
		inlined+=" $b"
	fi
done
awk -v builds="${builds[*]}" -v inlined="$inlined " "$SORTMED"'
FNR == 1 {
	b = FILENAME
	sub(/.*\//, "", b)
	sub(/\.txt$/, "", b)
}
/^Benchmark/ {
	name = $1
	sub(/^Benchmark/, "", name)
	sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) {
		seen[name] = 1
		order[++names] = name
	}
	for (f = 3; f < NF; f += 2) {
		k = ++cnt[b, name, $(f + 1)]
		v[b, name, $(f + 1), k] = $f
		if ($(f + 1) == "allocs/op" && $f > maxAllocs[b]) {
			maxAllocs[b] = $f
		}
	}
}
# med returns the median of the samples of build b, benchmark name and
# unit, or "" without samples; it sets lo and hi.
function med(b, name, unit,    i, a) {
	for (i = 1; i <= cnt[b, name, unit]; i++) {
		a[i] = v[b, name, unit, i]
	}
	return sortmed(a, cnt[b, name, unit])
}
function fmtAdded(x, base) {
	return x == "" || base == "" ? "-" : sprintf("%+.3f", x - base)
}
function fmtRatio(x, base) {
	return x == "" || base == "" || base == 0 ? "-" : sprintf("%.2fx", x / base)
}
function goal(x) {
	return x == "" ? "-" : x <= 1 ? "met" : "MISSED"
}
END {
	nb = split(builds, bs, " ")
	printf "%-14s", "benchmark"
	for (i = 1; i <= nb; i++) {
		printf " %22s", bs[i] " ns/op (min..max)"
	}
	for (i = 2; i <= nb; i++) {
		printf " %10s %7s", "+ns " bs[i], "ratio"
	}
	printf "\n"
	for (r = 1; r <= names; r++) {
		name = order[r]
		if (name ~ /^Paired/) {
			continue
		}
		printf "%-14s", name
		for (i = 1; i <= nb; i++) {
			m[i] = med(bs[i], name, "ns/op")
			printf " %7.3f (%6.3f..%-6.3f)", m[i], lo, hi
		}
		for (i = 2; i <= nb; i++) {
			printf " %10s %7s", fmtAdded(m[i], m[1]), fmtRatio(m[i], m[1])
		}
		printf "\n"
	}

	printf "\n%-14s %-6s %3s %9s %9s %13s %17s\n", "paired", "build", "n", "ref ns", "fn ns", "added ns/call", "added min..max"
	for (r = 1; r <= names; r++) {
		name = order[r]
		if (name !~ /^Paired/) {
			continue
		}
		for (i = 1; i <= nb; i++) {
			a = med(bs[i], name, "added-ns/call")
			if (a == "") {
				continue
			}
			alo = lo
			ahi = hi
			printf "%-14s %-6s %3d %9.3f %9.3f %+13.3f %+8.3f..%-+8.3f\n", name, bs[i], cnt[bs[i], name, "added-ns/call"], med(bs[i], name, "ref-ns/call"), med(bs[i], name, "fn-ns/call"), a, alo, ahi
		}
	}

	printf "\nallocs/op, largest over all benchmarks and passes:"
	for (i = 1; i <= nb; i++) {
		printf " %s %d", bs[i], maxAllocs[bs[i]]
	}
	printf "\n"

	# What a user sees, and where it comes from. Goal: at most 1 ns added
	# per instrumented call.
	pW = med("plain", "Work", "ns/op")
	pA = med("plain", "Add", "ns/op")
	pN = med("plain", "AddNoinline", "ns/op")
	printf "\nper instrumented call (goal: at most +1 ns)\n"
	for (i = 2; i <= nb; i++) {
		b = bs[i]
		w = med(b, "Work", "ns/op")
		a = med(b, "Add", "ns/op")
		pw = med(b, "PairedWork", "added-ns/call")
		pa = med(b, "PairedAdd", "added-ns/call")
		printf "  %-5s Work: %s ns (%s), goal %s; in-process vs WorkRef: %s ns\n", b, fmtAdded(w, pW), fmtRatio(w, pW), goal(w == "" || pW == "" ? "" : w - pW), pw == "" ? "-" : sprintf("%+.3f", pw)
		printf "  %-5s Add:  %s ns (%s) over the inlined Add, goal %s\n", b, fmtAdded(a, pA), fmtRatio(a, pA), goal(a == "" || pA == "" ? "" : a - pA)
		if (index(inlined, " " b " ")) {
			printf "  %-5s       Add is still inlined: the probe check sits at the call site\n", ""
			continue
		}
		printf "  %-5s       = lost inlining %s ns (plain AddNoinline - plain Add)\n", "", fmtAdded(pN, pA)
		printf "  %-5s       + probe checks  %s ns (%s Add - plain AddNoinline); in-process vs AddNoinline: %s ns\n", "", fmtAdded(a, pN), b, pa == "" ? "-" : sprintf("%+.3f", pa)
	}
}' "${files[@]}"

find_benchstat
if ((${#benchstat[@]})); then
	cols=()
	for b in "${builds[@]}"; do
		cols+=("$b=$OUT/$b.txt")
	done
	echo
	echo "== benchstat: each build against plain (the paired rows are in the summary above)"
	"${benchstat[@]}" -filter '-.name:/^Paired/ .unit:sec/op' "${cols[@]}"
fi
