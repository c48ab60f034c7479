#!/usr/bin/env bash
# fire-measure.sh is the measuring half of bench-fire.sh, which builds what
# it runs into OUT and runs it, on the host or inside a VM kernel (VM=):
# so it needs only bash, awk, grep, coreutils and bpftrace, and root. It
# runs the cases COUNT times in rotating passes, appends each run to
# OUT/raw.txt and prints the summary; bench-fire.sh describes the cases.
#
# Environment: OUT (absolute: the same path inside a VM), COUNT, N, CASES,
# as bench-fire.sh passes them.
set -euo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
: "${OUT:?OUT is the directory bench-fire.sh built into}"
COUNT=${COUNT:-5}
N=${N:-100000}

optimizes=no
if grep -q ' arch_uprobe_optimize$' /proc/kallsyms && grep -q ' __x64_sys_uprobe$' /proc/kallsyms; then
	optimizes=yes
fi

pair='usdt:BIN:fire:entry__main__FN { @s[arg0] = nsecs; }
usdt:BIN:fire:exit__main__FN /@s[arg0]/ { @h = hist(nsecs - @s[arg0]); delete(@s[arg0]); @n = count(); }'
exitonly='usdt:BIN:fire:exit__main__FN { @h = hist(arg1); @n = count(); }'
declare -A cmdOf scriptOf byPath
add() { # add CASE "COMMAND" 'SCRIPT': BIN in SCRIPT is COMMAND's program
	cmdOf[$1]=$2
	scriptOf[$1]=${3//BIN/${2%% *}}
}
add c-sdt "$OUT/cfire sdt $N" 'usdt:BIN:cfire:tick { @n = count(); }'
add c-nop5 "$OUT/cfire nop5 $N" 'uprobe:BIN:site5 { @n = count(); }'
add c-nop5x "$OUT/cfire nop5x $N" 'uprobe:BIN:site5x { @n = count(); }'
add c-step "$OUT/cfire step $N" 'uprobe:BIN:sitestep { @n = count(); }'
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
add notes-entry "$OUT/notes/fire -mode still -n $N" 'usdt:BIN:fire:entry__main__still { @n = count(); }'
add notes-pair "$OUT/notes/fire -mode still -n $N" "${pair//FN/still}"
add switch-plain "$OUT/switch/fire -mode framed -n $N" 'usdt:BIN:fire:entry__main__framed { @n = count(); }'
# switch runs the program in its own place: bpftrace attaches by path.
cmdOf[switch-copy]="$OUT/switch/usdt-toolexec switch main.framed -- $OUT/switch/fire -mode framed -n $N"
scriptOf[switch-copy]="usdt:$OUT/switch/fire:fire:entry__main__framed { @n = count(); }"
byPath[switch-copy]=1
all="c-sdt c-nop5 c-nop5x c-step gen-after gen-before entry-after entry-before entry-only exit-count exit-after pair-after pair-before get-exit-after get-pair-after get-pair-before exit-count-ret exit-after-ret pair-after-ret notes-entry notes-pair switch-plain switch-copy"
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
		if [[ -n ${byPath[$c]:-} ]]; then
			bpftrace -e "${scriptOf[$c]}" >"$OUT/bt.out" 2>&1 &
			bt=$!
			until grep -q '^Attaching' "$OUT/bt.out"; do sleep 0.1; done
			sleep 1 # "Attaching" comes before the attach
			traced=$("${cmd[@]}" | loopNs)
			kill -INT "$bt"
			wait "$bt" || true
			out=$(cat "$OUT/bt.out")
		else
			out=$(bpftrace -e "${scriptOf[$c]}" -c "${cmdOf[$c]}" 2>&1)
			traced=$(loopNs <<<"$out")
		fi
		fires=$(awk '$1 == "@n:" { print $2 }' <<<"$out")
		if [[ $fires != "$N" || -z $traced ]]; then
			printf '%s: bpftrace counted %s fires, want %s:\n%s\n' "$c" "${fires:-no}" "$N" "$out" >&2
			exit 1
		fi
		echo "$c $i $plain $traced $fires" >>"$raw"
	done
done

echo "raw results: $raw"
echo "kernel $(uname -r), uprobe optimization (arch_uprobe_optimize, sys_uprobe): $optimizes, $(bpftrace --version)"
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
		amin = lo
		amax = hi
		printf "%-16s %3d %12.1f %12.1f %12.1f %9.1f..%-9.1f %8s\n", c, n[c], median(plain, c), median(traced, c), a, amin, amax, ref ? sprintf("%.2fx", a / ref) : "-"
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
