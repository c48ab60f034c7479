#!/usr/bin/env bash
# bench-fire.sh measures what one probe fire costs with bpftrace attached
# and counting, for a C sys/sdt.h probe and for this repository's probes,
# after (this tree: 5-byte NOP sites on amd64, which Linux 6.18+ turns into
# a call to a uprobe trampoline after the first hit) and before (commit
# BASE: 1-byte NOP sites, a trap on every fire).
#
# It builds scripts/testdata/fire twice, with the usdtgen and usdt-toolexec
# of this tree and of BASE (unpacked with git archive into OUT), and
# scripts/testdata/fire/fire.c with gcc. Then, COUNT times, every case runs
# once untraced and once under `bpftrace -c`, the cases in a rotating order
# so that a noisy stretch of the machine hits all of them:
#
#   c-sdt        a sys/sdt.h probe (1-byte NOP), usdt:cfire:cfire:tick
#   c-nop5       a 5-byte NOP in C, uprobe on it (optimized where the
#                kernel can)
#   c-nop5x      the same NOP across a page boundary, which the kernel does
#                not optimize: the trap path of a 5-byte NOP
#   gen-*        a usdtgen probe, fire:tick
#   entry-*      the automatic entry probe of small, a tiny function
#   entry-only   lone's entry probe: a function like small whose rule asks
#                for no exit probe, so its traced call reads no clock
#   exit-count   small's exit probe alone, count(): the fire itself, as
#                the other cases count it
#   exit-after   small's exit probe alone, hist(arg1): the call's latency
#                in one fire
#   pair-*       small's entry and exit, paired on the goroutine id (arg0)
#                in a map: the latency script before exit probes carried it
#   *-ret        exit-count, exit-after and pair-after on a build of this
#                tree whose rules give small unwind: false
#                (scripts/testdata/fire/rules-ret.yml): the exit probe
#                fired at the return, not in a deferred call
#   get-*        the same two scripts on Cache.Get (examples/toolexec's)
#
# Each program times its own loop of N iterations. A case's cost per fire
# (per call for pair and get: two probes) is (traced - untraced loop time)
# / fires, fires being bpftrace's count, which must equal N. The summary
# prints the medians over the passes and the ratio to c-sdt.
#
# Environment:
#   COUNT=5      passes
#   N=100000     iterations per loop
#   BASE=7f904bd the commit with 1-byte sites to compare against
#   CASES=       space-separated subset of the cases (all when empty)
#   OUT=         directory for builds and raw results (a new temp dir if
#                empty)
#
# Needs root (bpftrace), gcc and systemtap-sdt-dev (sys/sdt.h).
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
root=$PWD
COUNT=${COUNT:-5}
N=${N:-100000}
BASE=${BASE:-7f904bd}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-bench-fire.XXXXXX")}
src=$root/scripts/testdata/fire
mkdir -p "$OUT"

# shellcheck source=scripts/fire-build.sh
source "$root/scripts/fire-build.sh"

echo "# building into $OUT" >&2
rm -rf "$OUT/base-tree"
mkdir -p "$OUT/base-tree"
git archive "$BASE" | tar -x -C "$OUT/base-tree"
build after "$root"
build before "$OUT/base-tree"
build ret "$root" rules-ret.yml
gcc -O2 -o "$OUT/cfire" "$src/fire.c"

# The bytes at each probe site, as objdump decodes them.
echo "== probe sites"
for v in after before ret; do
	"$OUT/$v/usdt-toolexec" list "$OUT/$v/fire" >"$OUT/$v/probes.txt"
	awk 'NR > 1 { print $2, $3 }' "$OUT/$v/probes.txt" | while read -r name pc; do
		printf '%-7s %-28s %s\n' "$v" "$name" "$(objdump -d --start-address="$pc" --stop-address=$((pc + 5)) "$OUT/$v/fire" | awk -F'\t' '/^ *[0-9a-f]+:/ { print $2 $3; exit }')"
	done
done
echo

optimizes=no
if grep -q ' arch_uprobe_optimize$' /proc/kallsyms && grep -q ' __x64_sys_uprobe$' /proc/kallsyms; then
	optimizes=yes
fi

pair='usdt:BIN:fire:entry__main__FN { @s[arg0] = nsecs; }
usdt:BIN:fire:exit__main__FN /@s[arg0]/ { @h = hist(nsecs - @s[arg0]); delete(@s[arg0]); @n = count(); }'
exitonly='usdt:BIN:fire:exit__main__FN { @h = hist(arg1); @n = count(); }'
declare -A cmdOf scriptOf
add() { # add CASE "COMMAND" 'SCRIPT': BIN in SCRIPT is COMMAND's program
	cmdOf[$1]=$2
	scriptOf[$1]=${3//BIN/${2%% *}}
}
add c-sdt "$OUT/cfire sdt $N" 'usdt:BIN:cfire:tick { @n = count(); }'
add c-nop5 "$OUT/cfire nop5 $N" 'uprobe:BIN:site5 { @n = count(); }'
add c-nop5x "$OUT/cfire nop5x $N" 'uprobe:BIN:site5x { @n = count(); }'
for v in after before; do
	add gen-$v "$OUT/$v/fire -mode gen -n $N" 'usdt:BIN:fire:tick { @n = count(); }'
	add entry-$v "$OUT/$v/fire -mode call -n $N" 'usdt:BIN:fire:entry__main__small { @n = count(); }'
	add pair-$v "$OUT/$v/fire -mode call -n $N" "${pair//FN/small}"
	add get-pair-$v "$OUT/$v/fire -mode get -n $N" "${pair//FN/Cache__Get}"
done
add entry-only "$OUT/after/fire -mode lone -n $N" 'usdt:BIN:fire:entry__main__lone { @n = count(); }'
add exit-count "$OUT/after/fire -mode call -n $N" 'usdt:BIN:fire:exit__main__small { @n = count(); }'
add exit-after "$OUT/after/fire -mode call -n $N" "${exitonly//FN/small}"
add get-exit-after "$OUT/after/fire -mode get -n $N" "${exitonly//FN/Cache__Get}"
add exit-count-ret "$OUT/ret/fire -mode call -n $N" 'usdt:BIN:fire:exit__main__small { @n = count(); }'
add exit-after-ret "$OUT/ret/fire -mode call -n $N" "${exitonly//FN/small}"
add pair-after-ret "$OUT/ret/fire -mode call -n $N" "${pair//FN/small}"
all="c-sdt c-nop5 c-nop5x gen-after gen-before entry-after entry-before entry-only exit-count exit-after pair-after pair-before get-exit-after get-pair-after get-pair-before exit-count-ret exit-after-ret pair-after-ret"
read -r -a cases <<<"${CASES:-$all}"

raw=$OUT/raw.txt
: >"$raw"
loopNs() { awk '$1 == "loop_ns" { print $2 }'; }
for ((i = 1; i <= COUNT; i++)); do
	echo "# pass $i/$COUNT" >&2
	for ((j = 0; j < ${#cases[@]}; j++)); do
		c=${cases[(i + j) % ${#cases[@]}]}
		read -r -a cmd <<<"${cmdOf[$c]}"
		plain=$("${cmd[@]}" | loopNs)
		out=$(bpftrace -e "${scriptOf[$c]}" -c "${cmdOf[$c]}" 2>&1)
		traced=$(loopNs <<<"$out")
		fires=$(awk '$1 == "@n:" { print $2 }' <<<"$out")
		if [[ $fires != "$N" || -z $traced ]]; then
			printf '%s: bpftrace counted %s fires, want %s:\n%s\n' "$c" "${fires:-no}" "$N" "$out" >&2
			exit 1
		fi
		echo "$c $i $plain $traced $fires" >>"$raw"
	done
done

echo "raw results: $raw"
echo "kernel $(uname -r), uprobe optimization (arch_uprobe_optimize, sys_uprobe): $optimizes"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "N=$N COUNT=$COUNT"
echo
# Medians over the passes of the untraced and traced loop's ns per
# iteration and of the added ns per fire (per call for pair and get).
awk -v order="${cases[*]}" "$SORTMED"'
{
	k = ++n[$1]
	plain[$1, k] = $3 / $5
	traced[$1, k] = $4 / $5
	added[$1, k] = ($4 - $3) / $5
}
function median(arr, c,    i, a) {
	for (i = 1; i <= n[c]; i++) {
		a[i] = arr[c, i]
	}
	return sortmed(a, n[c])
}
END {
	split(order, cs, " ")
	ref = ("c-sdt" in n) ? median(added, "c-sdt") : 0
	printf "%-16s %3s %12s %12s %12s %19s %8s\n", "case", "n", "untraced ns", "traced ns", "added ns", "added min..max", "vs c-sdt"
	for (i = 1; i in cs; i++) {
		c = cs[i]
		a = median(added, c)
		printf "%-16s %3d %12.1f %12.1f %12.1f %9.1f..%-9.1f %8s\n", c, n[c], median(plain, c), median(traced, c), a, lo, hi, ref ? sprintf("%.2fx", a / ref) : "-"
	}
	print ""
	print "Cache.Get slowed by tracing (traced ns / untraced ns per call, medians):"
	for (i = 1; i in cs; i++) {
		c = cs[i]
		if (c ~ /^get-/) {
			printf "  %-16s %8.1f ns -> %8.1f ns  %.1fx\n", c, median(plain, c), median(traced, c), median(traced, c) / median(plain, c)
		}
	}
}' "$raw"
