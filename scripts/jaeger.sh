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

dir=${USDT_JAEGER_DIR:-/var/cache/go-usdt/jaeger}
version=v1.76.0
partial=$dir.partial

if [[ -e $dir/.complete ]] && [[ $(cat "$dir/.complete") == "$version" ]]; then
	echo "jaeger: $dir/jaeger ($version) is built"
	exit 0
fi
rm -rf "$dir" "$partial"
mkdir -p "$partial"
start=$SECONDS
# Built inside its module, from the proxy's copy: Jaeger's go.mod has
# replace directives, which go install PKG@VERSION refuses. (From /, so
# that no go.mod around gets the module added to its go.sum.)
src=$(cd / && go mod download -json "github.com/jaegertracing/jaeger@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$partial/jaeger" ./cmd/jaeger)
echo "$version" >"$partial/.complete"
mv "$partial" "$dir"
echo "jaeger: built $dir/jaeger in $((SECONDS - start)) s, $(du -h "$dir/jaeger" | cut -f1)"
