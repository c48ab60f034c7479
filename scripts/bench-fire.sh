#!/usr/bin/env bash
# bench-fire.sh measures what one probe fire costs with bpftrace attached
# and counting, for a C sys/sdt.h probe and for this repository's probes,
# after (this tree: on amd64 a 1-byte NOP, where the note points and so
# where bpftrace attaches, a trap the kernel emulates on every fire, then a
# 5-byte NOP, which Linux 6.18+ turns into a call to a uprobe trampoline
# for a tracer that attaches there, as usdt-toolexec trace does:
# scripts/bench-trace.sh measures that) and before (commit BASE: 1-byte
# NOP sites alone, a trap on every fire).
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
#   c-step       a 5-byte cmp in C, uprobe on it: a trap and a single step
#                out of line on every kernel, what a 5-byte NOP costs
#                where the kernel does not emulate it
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
#   notes-*      still (small kept a call) with sites: notes
#                (scripts/testdata/fire/rules-notes.yml): notes-entry
#                counts its entry probe, on the function's first
#                instruction, notes-pair pairs its entry and exit as
#                pair-* does
#   switch-*     framed (a function with a frame, which calls still) with
#                sites: switch (scripts/testdata/fire/rules-switch.yml):
#                switch-plain counts its entry probe at the note on its
#                own code, unswitched (a trap and a single step, as
#                notes-entry); switch-copy runs it under usdt-toolexec
#                switch, which sends its calls to the traced copy, and
#                counts the same probe there (bpftrace attached by path,
#                as -c would look for it in switch)
#
# scripts/fire-measure.sh runs the passes and prints the summary. With
# VM=NAME (a kernel that `go run ./internal/testing/vm/vmrun -list` lists,
# e.g. 6.1-amd64) it runs in that kernel under qemu instead, with OUT
# shared: the builds and the probe sites stay the host's, the passes, the
# kernel's uprobe optimization and the summary are the guest's. qemu
# emulates the CPU there (TCG), so only a run's ratios mean anything.
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
#                empty; with VM, one the guest can make, e.g. under /tmp)
#   VM=          a VM kernel to measure in (the host's kernel when empty)
#   VM_TIMEOUT=2h  how long the VM may run
#
# Needs root (bpftrace), gcc and systemtap-sdt-dev (sys/sdt.h); with VM,
# qemu and the images of scripts/vm-images.sh instead of bpftrace.
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
OUT=$(realpath "$OUT")

# shellcheck source=scripts/fire-build.sh
source "$root/scripts/fire-build.sh"

echo "# building into $OUT" >&2
rm -rf "$OUT/base-tree"
mkdir -p "$OUT/base-tree"
git archive "$BASE" | tar -x -C "$OUT/base-tree"
build after "$root"
# BASE knows no unwind: its exit probes were all deferred calls, which is
# what unwind: true asks for now. Nor inline: it probed every function.
grep -v '^ *unwind:\|^ *inline:' "$src/rules.yml" >"$OUT/rules-before.yml"
build before "$OUT/base-tree" "$OUT/rules-before.yml"
build ret "$root" "$src/rules-ret.yml"
build notes "$root" "$src/rules-notes.yml"
build switch "$root" "$src/rules-switch.yml"
gcc -O2 -o "$OUT/cfire" "$src/fire.c"

# The bytes at each probe site, as objdump decodes them.
echo "== probe sites"
for v in after before ret notes switch; do
	"$OUT/$v/usdt-toolexec" list "$OUT/$v/fire" >"$OUT/$v/probes.txt"
	awk 'NR > 1 { print $2, $3 }' "$OUT/$v/probes.txt" | while read -r name pc; do
		printf '%-7s %-28s %s\n' "$v" "$name" "$(objdump -d --start-address="$pc" --stop-address=$((pc + 5)) "$OUT/$v/fire" | awk -F'\t' '/^ *[0-9a-f]+:/ { print $2 $3; exit }')"
	done
done
echo

measure=(env OUT="$OUT" COUNT="$COUNT" N="$N" CASES="${CASES:-}" bash)
if [[ -z ${VM:-} ]]; then
	"${measure[@]}" scripts/fire-measure.sh
	exit
fi
# The VM shares OUT at the same path, and the measuring script with it:
# the guest's root has bpftrace but not this tree.
mkdir -p "$OUT/scripts"
cp scripts/fire-measure.sh scripts/lib.sh "$OUT/scripts/"
echo "# measuring in the VM's $VM kernel (emulated: compare ratios, not ns); host load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
status=0
go run ./internal/testing/vm/vmrun -kernel "$VM" -dir "$OUT" -timeout "${VM_TIMEOUT:-2h}" -- \
	"${measure[@]}" "$OUT/scripts/fire-measure.sh" || status=$?
echo "host: kernel $(uname -r), load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
