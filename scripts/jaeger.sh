#!/usr/bin/env bash
# Builds, once per machine, the Jaeger all-in-one binary (v1.76.0, from the
# Go module proxy) that the OpenTelemetry end-to-end test of
# `usdt-toolexec trace -otlp` sends its spans to and queries back. It lives
# outside the repository and is reused when complete; a half-built attempt
# is thrown away. It took 4.8 minutes on an idle machine with cold Go
# caches, 21 with its 2 cores shared with other builds, and makes a 116 MB
# binary, plus its modules in the Go module cache.
#
# The directory is $USDT_JAEGER_DIR, default /var/cache/go-usdt/jaeger; the
# test looks there too (internal/testing/e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

build_cached_binary jaeger "${USDT_JAEGER_DIR:-/var/cache/go-usdt/jaeger}" \
	github.com/jaegertracing/jaeger v1.76.0 ./cmd/jaeger
