#!/usr/bin/env bash
# bench-scale.sh measures usdt-toolexec at thousands of probes: a real
# program built plain and with every function of a selection probed.
#
# Programs (CGO_ENABLED=0, modules through the Go module proxy):
#
#   own       go-jsonnet VERSION's cmd/jsonnet, its own packages probed
#             (github.com/google/go-jsonnet/...): about 1k probes
#   all       the same with "..." (the standard library too): about 10k
#   entry     the same "..." with entry probes only (probes: [entry]):
#             about 5k, what a selection costs without the exit probes
#   unwind    the same "..." with unwind: true: every exit probe a
#             deferred call, which fires while a panic unwinds too
#   big       scripts/testdata/bigjsonnet, which links go-jsonnet and large
#             standard library packages (net/http, go/types, crypto/tls,
#             html/template, ...), with "...": 25k+
#   bigunwind big with unwind: true
#   biginline big with inline: probe: the functions the compiler inlines
#             probed too, split into an untraced body and a traced copy:
#             26k+ probes, the start-up benchmark's large case
#   caddy     scripts/testdata/caddy, Caddy v2.11.9 with its standard
#             modules, "..." with inline: probe: 120k+ probes, run as
#             "caddy version", the start-up benchmark's largest case
#   notes     "..." with sites: notes: every function as compiled, its
#             probes notes on its own code (no inlining asked, no code)
#   bignotes  big with sites: notes
#   switch    "..." with sites: switch: every function as compiled, with
#             notes on its code, and a traced copy beside it
#   bigswitch big with sites: switch
#
# For each: a cold build plain and probed, each with a fresh, empty GOCACHE;
# warm builds of each (the main package edited, everything else cached;
# the median of WARM, plain and probed alternated);
# the ratios probed/plain; the size added per probe; the time of
# `usdt-toolexec list`; and the start-up of tracers attaching to the probed
# executable, one after the other in this run:
#
#   trace     usdt-toolexec trace -v on every probe, the program run once,
#             with -transport auto (the ring where it records every probe)
#             and bpf: the attach time it reports, the time from start to
#             its first printed event, and its peak RSS
#   bpftrace  each bpftrace present (the host's, and 0.27 from the sid
#             chroot of scripts/sid-chroot.sh): seconds from start to the
#             end of a run that attaches ONE probe (the first one `list`
#             shows) and runs the program; and, on `own` only, every probe
#             (with the probe limits raised), killed after TIMEOUT seconds
#
# The go-jsonnet testdata programs (testdata/*.jsonnet) run under the plain
# and the probed cmd/jsonnet of `own`, `all`, `entry` and `unwind`: stdout,
# stderr and exit code must be the same, else the script fails.
#
# Environment: VERSION=v0.21.0, TIMEOUT=180, WARM=9, OUT= (a new temp dir
# if empty), PROGRAMS="own all entry unwind big bigunwind" (biginline,
# caddy, notes, bignotes, switch and bigswitch on request).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO=$PWD
VERSION=${VERSION:-v0.21.0}
TIMEOUT=${TIMEOUT:-180}
WARM=${WARM:-9}
read -r -a programs <<<"${PROGRAMS:-own all entry unwind big bigunwind}"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod USDT_RULES=
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-scale.XXXXXX")}
SID=${USDT_SID_CHROOT:-/var/cache/go-usdt/sid}
mkdir -p "$OUT/bin"
go build -o "$OUT/bin/" ./cmd/usdt-toolexec
UT=$OUT/bin/usdt-toolexec

src=$(go mod download -json "github.com/google/go-jsonnet@$VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
rm -rf "$OUT/jsonnet" "$OUT/big" "$OUT/caddy"
cp -r "$src" "$OUT/jsonnet"
cp -r scripts/testdata/bigjsonnet "$OUT/big"
cp -r scripts/testdata/caddy "$OUT/caddy"
chmod -R u+w "$OUT/jsonnet" "$OUT/big" "$OUT/caddy"
# Downloads are not build time.
(cd "$OUT/jsonnet" && go mod download)
(cd "$OUT/big" && go mod download)
(cd "$OUT/caddy" && go mod download)
printf 'provider: jn\nrules:\n  - package: "github.com/google/go-jsonnet/..."\n' >"$OUT/own.yml"
printf 'provider: jn\nrules:\n  - package: "..."\n' >"$OUT/all.yml"
printf 'provider: jn\nrules:\n  - package: "..."\n    probes: [entry]\n' >"$OUT/entry.yml"
printf 'provider: jn\nrules:\n  - package: "..."\n    unwind: true\n' >"$OUT/unwind.yml"
cp "$OUT/all.yml" "$OUT/big.yml"
cp "$OUT/unwind.yml" "$OUT/bigunwind.yml"
printf 'provider: jn\nrules:\n  - package: "..."\n    inline: probe\n' >"$OUT/biginline.yml"
cp "$OUT/biginline.yml" "$OUT/caddy.yml"
printf 'provider: jn\nrules:\n  - package: "..."\n    sites: notes\n' >"$OUT/notes.yml"
cp "$OUT/notes.yml" "$OUT/bignotes.yml"
printf 'provider: jn\nrules:\n  - package: "..."\n    sites: switch\n' >"$OUT/switch.yml"
cp "$OUT/switch.yml" "$OUT/bigswitch.yml"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }

# build PROG CONFIG(plain|probed) OUTFILE COLD(1|0): prints wall seconds.
build() {
	local prog=$1 config=$2 exe=$3 cold=$4 dir pkg main
	case $prog in
	big*) dir=$OUT/big pkg=. main=$OUT/big/main.go ;;
	caddy) dir=$OUT/caddy pkg=. main=$OUT/caddy/main.go ;;
	*) dir=$OUT/jsonnet pkg=./cmd/jsonnet main=$OUT/jsonnet/cmd/jsonnet/cmd.go ;;
	esac
	local cache=$OUT/cache-$prog-$config
	if [ "$cold" = 1 ]; then
		rm -rf "$cache" "$OUT/xdg-$prog-$config"
	else
		# A warm rebuild: the main package changed, the rest is cached.
		echo "// warm $(now)" >>"$main"
	fi
	local flags=()
	[ "$config" = probed ] && flags=("-toolexec=$UT -rules $OUT/$prog.yml")
	local t0
	t0=$(now)
	(cd "$dir" && GOCACHE=$cache XDG_CACHE_HOME=$OUT/xdg-$prog-$config go build "${flags[@]}" -o "$exe" "$pkg")
	secs "$t0" "$(now)"
}

median() { printf '%s\n' "$@" | sort -g | sed -n "$(($# / 2 + 1))p"; }

# same PLAIN PROBED: the testdata programs print the same under both
# (few processes per program: on a loaded machine each fork counts).
same() {
	local n=0 bad=0 f ra rb
	cd "$OUT/jsonnet/testdata" || return 1
	for f in *.jsonnet; do
		n=$((n + 1))
		timeout 60 "$1" "$f" >"$OUT/plain.out" 2>"$OUT/plain.err" && ra=0 || ra=$?
		timeout 60 "$2" "$f" >"$OUT/probed.out" 2>"$OUT/probed.err" && rb=0 || rb=$?
		if [ "$ra" != "$rb" ] || ! cmp -s "$OUT/plain.out" "$OUT/probed.out" || ! cmp -s "$OUT/plain.err" "$OUT/probed.err"; then
			bad=$((bad + 1))
			echo "differs: $f (exit $ra, $rb)" >&2
		fi
	done
	echo "$n programs, $bad differ"
	[ "$bad" = 0 ]
}

# first_line CMD...: seconds from start to the first line on stdout of CMD
# (its stderr to $OUT/stderr.txt), then waits for CMD to end.
first_line() {
	local t0 line t1
	t0=$(now)
	{ read -r line && t1=$(now) && cat >/dev/null; } < <("$@" 2>"$OUT/stderr.txt")
	[ -n "${t1:-}" ] && secs "$t0" "$t1" || echo "none"
}

# bt NAME ARGS...: runs a bpftrace (host or sid) with a timeout, prints
# seconds or "> TIMEOUT s" or the failure.
bt() {
	local name=$1
	shift
	local cmd=(bpftrace)
	[ "$name" = sid ] && cmd=(chroot "$SID" env -C / bpftrace)
	local t0 rc=0
	t0=$(now)
	BPFTRACE_MAX_PROBES=100000 BPFTRACE_MAX_BPF_PROGS=100000 timeout -s INT "$TIMEOUT" "${cmd[@]}" "$@" >"$OUT/bt.txt" 2>&1 || rc=$?
	local el
	el=$(secs "$t0" "$(now)")
	if [ "$rc" = 124 ]; then
		echo "> $TIMEOUT s"
	# bpftrace 0.17 calls a memlock limit it need not raise an ERROR.
	elif [ "$rc" != 0 ] || grep ERROR "$OUT/bt.txt" | grep -qv RLIMIT_MEMLOCK; then
		echo "$el s, failed: $(grep ERROR "$OUT/bt.txt" | grep -v RLIMIT_MEMLOCK | head -1 | cut -c1-80) ($(grep -c ERROR "$OUT/bt.txt") errors)"
	else
		echo "$el s"
	fi
}

tracers=()
command -v bpftrace >/dev/null && tracers+=(host)
[ -x "$SID/usr/bin/bpftrace" ] && tracers+=(sid)

echo "# bench-scale $(date -u +%FT%TZ) $(go version | cut -d' ' -f3-) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# bpftrace: $(bpftrace --version 2>/dev/null || echo none) (host); $([ -x "$SID/usr/bin/bpftrace" ] && chroot "$SID" bpftrace --version || echo none) (sid)"
for prog in "${programs[@]}"; do
	plain=$OUT/$prog-plain probed=$OUT/$prog-probed
	pc=$(build "$prog" plain "$plain" 1)
	qc=$(build "$prog" probed "$probed" 1)
	# Warm builds take a second or less, and single ones move by several
	# per cent: the median of WARM, alternated.
	pws=() qws=()
	for _ in $(seq "$WARM"); do
		pws+=("$(build "$prog" plain "$plain" 0)")
		qws+=("$(build "$prog" probed "$probed" 0)")
	done
	pw=$(median "${pws[@]}") qw=$(median "${qws[@]}")
	t0=$(now)
	probes=$("$UT" list "$probed" | tail -n +2 | wc -l)
	lt=$(secs "$t0" "$(now)")
	ps=$(stat -c %s "$plain") qs=$(stat -c %s "$probed")
	echo "## $prog: $probes probes"
	echo "cold build plain $pc s, probed $qc s: x$(ratio "$pc" "$qc")"
	echo "warm build plain $pw s, probed $qw s: x$(ratio "$pw" "$qw")"
	echo "size plain $ps, probed $qs: $(((qs - ps) / probes)) B per probe"
	echo "list: $lt s"
	case $prog in
	big*) run=("$probed") ;;
	caddy) run=("$probed" version) ;;
	*)
		res=$(same "$plain" "$probed") || {
			echo "testdata: $res"
			exit 1
		}
		echo "testdata: $res"
		run=("$probed" -e 1)
		;;
	esac
	for transport in auto bpf; do
		first=$(first_line /usr/bin/time -f %M -o "$OUT/rss.txt" "$UT" trace -v -transport "$transport" -- "${run[@]}")
		echo "trace -transport $transport: $(grep -o 'attached.*' "$OUT/stderr.txt" | head -1); $(grep -o 'transport [a-z]*:' "$OUT/stderr.txt" | head -1) first event at $first s; peak RSS $(($(cat "$OUT/rss.txt") / 1024)) MB"
	done
	one=$("$UT" list "$probed" | awk 'NR == 2 { print $1 ":" $2 }')
	for b in "${tracers[@]}"; do
		echo "bpftrace $b, one probe ($one): $(bt "$b" -e "usdt:$probed:$one { @n = count(); }" -c "${run[*]}")"
		if [ "$prog" = own ]; then
			echo "bpftrace $b, all $probes probes: $(bt "$b" -e "usdt:$probed:jn:* { @n = count(); }" -c "${run[*]}")"
		fi
	done
done
