#!/usr/bin/env bash
# Builds, once per machine, the Prometheus server (v3, module version
# v0.316.0, from the Go module proxy) that the end-to-end test of
# `usdt-toolexec trace -stats -metrics` has scrape the tracer, and that
# takes OTLP metrics on its receiver (--web.enable-otlp-receiver). It
# lives outside the repository and is reused when complete; a half-built
# attempt is thrown away. Built without the web UI's assets, which the
# tests do not need, and without its service discovery plugins
# (-tags remove_all_sd: the tests name their targets in static_configs),
# whose cloud SDKs (Kubernetes, AWS, Azure, GCE, ...) would be most of the
# modules to download and of the build cache, several GB: an attempt with
# them once filled the disk.
#
# The directory is $USDT_PROMETHEUS_DIR, default
# /var/cache/go-usdt/prometheus; the test looks there too.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

build_cached_binary prometheus "${USDT_PROMETHEUS_DIR:-/var/cache/go-usdt/prometheus}" \
	github.com/prometheus/prometheus v0.316.0 ./cmd/prometheus -tags remove_all_sd
