#!/usr/bin/env bash
# bench-export.sh measures trace's export path on one core (-cpu 1),
# COUNT runs each: the decoder turning ring records into events
# (internal/trace BenchmarkDecode/values: a call's entry and exit, their
# values read; /errors: only whether the exit's error is nil, as -otlp's
# metrics count a call that sampling drops; /unread: none read),
# and the events turned into OTLP/HTTP protobuf at a receiver that
# discards it (internal/export/otlp BenchmarkExport/usdt), beside the
# OpenTelemetry SDK alone making the same spans through the same batch
# processor and exporter (BenchmarkExport/sdk), the floor under it. It
# prints each one's median rate and the whole path's: one span is one
# call's two records decoded and its span exported, on one core. Issue
# 52's goal for the whole path: 1 M spans/s.
#
# Environment: COUNT=5, BENCHTIME=100000x.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-100000x}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench '^BenchmarkDecode$' -cpu 1 -count "$COUNT" ./internal/trace/ | tee -a "$out" | grep '^Benchmark'
go test -run '^$' -bench '^BenchmarkExport$' -cpu 1 -count "$COUNT" -benchtime "$BENCHTIME" ./internal/export/otlp/ | tee -a "$out" | grep '^Benchmark'

echo "median rates on one core ($COUNT runs, $(go env GOVERSION), $(grep -m1 '^cpu:' "$out" | cut -d' ' -f2- | sed 's/ *$//')):"
awk "$SORTMED"'
	function metric(unit,    i) { for (i = 3; i < NF; i++) if ($(i + 1) == unit) return $i; return "" }
	/^BenchmarkDecode\/values/ { d[++nd] = metric("records/s") }
	/^BenchmarkDecode\/errors/ { e[++ne] = metric("records/s") }
	/^BenchmarkDecode\/unread/ { r[++nr] = metric("records/s") }
	/^BenchmarkExport\/usdt/ { u[++nu] = metric("spans/s"); ud[nu] = metric("dropped/span") }
	/^BenchmarkExport\/sdk/ { s[++ns] = metric("spans/s"); sd[ns] = metric("dropped/span") }
	END {
		dec = sortmed(d, nd); ex = sortmed(u, nu); sdk = sortmed(s, ns)
		udrop = sortmed(ud, nu); sdrop = sortmed(sd, ns)
		printf "decode              %9.0f records/s (%.0f calls/s)\n", dec, dec / 2
		printf "decode, errors only %9.0f records/s (a call that sampling drops, counted by -metrics)\n", sortmed(e, ne)
		printf "decode, values unread %7.0f records/s (a call that sampling drops)\n", sortmed(r, nr)
		printf "export (usdt)       %9.0f spans/s, median share dropped %s\n", ex, udrop
		printf "the SDK alone       %9.0f spans/s, median share dropped %s\n", sdk, sdrop
		if (dec > 0 && ex > 0)
			printf "whole path          %9.0f spans/s: 1 / (2 / decode + 1 / export); goal 1000000\n", 1 / (2 / dec + 1 / ex)
	}' "$out"
