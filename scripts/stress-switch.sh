#!/usr/bin/env bash
# stress-switch.sh runs TestSwitchStress (internal/testing/e2e) with
# CYCLES attaches and detaches (1,000 by default; make test runs 25): a
# program built with sites: switch keeps 8 goroutines calling its
# functions in tight loops, its stacks growing, the GC churning, a CPU
# profile running (SIGPROF at 1 kHz) and async preemption on, while
# usdt-toolexec trace -stats -p switches every function of main to its
# traced copy, counts a window of calls, and switches them back. Each
# window's count must be exact, and the program's output and exit
# status those of an untraced run. It prints the test's log: the time
# the cycles took.
#
# Environment: CYCLES=1000.
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${CYCLES:-1000}
USDT_SWITCH_STRESS_CYCLES=$CYCLES go test -count=1 -v -timeout 60m -run '^TestSwitchStress$' ./internal/testing/e2e/
