#!/usr/bin/env bash
# inline-check.sh builds real modules plain and with every function of the
# module probed (nothing traced), each with -gcflags=MODULE/...=-m=2, and
# compares what the compiler inlines (internal/testing/inlinecheck): every
# function the plain build inlines must still be inlinable, and every call
# it inlines still inlined on the same line. It lists any loss with its
# reason and exits 1 if there is one.
#
#   MODULES="path@version:build-target ..."   (default: bbolt and go-jsonnet)
#   RULES_EXTRA="inline: probe"               a line added to the rule
#   OUT=                                      work directory (temp if empty)
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
out=${OUT:-$(mktemp -d /tmp/usdt-inline-check-XXXXXX)}
mkdir -p "$out"
modules=${MODULES:-"go.etcd.io/bbolt@v1.5.0:./cmd/bbolt github.com/google/go-jsonnet@v0.21.0:./cmd/jsonnet"}

go build -o "$out/usdt-toolexec" ./cmd/usdt-toolexec
go build -o "$out/inlinecheck" ./internal/testing/inlinecheck
export CGO_ENABLED=0 GOFLAGS=-mod=mod

status=0
for m in $modules; do
	mod=${m%%:*} target=${m#*:} path=${m%%@*}
	name=$(basename "$path")
	dir=$out/$name
	fetch_module "$mod" "$dir"
	printf 'rules:\n  - package: "%s/..."\n' "$path" >"$out/$name.yml"
	if [ -n "${RULES_EXTRA:-}" ]; then
		printf '    %s\n' "$RULES_EXTRA" >>"$out/$name.yml"
	fi
	gcflags="$path/...=-m=2"
	(cd "$dir" && go build -gcflags="$gcflags" -o "$out/$name.plain" "$target") >"$out/$name.plain.m" 2>&1
	(cd "$dir" && go build -toolexec="$out/usdt-toolexec -rules $out/$name.yml" -gcflags="$gcflags" -o "$out/$name.probed" "$target") >"$out/$name.probed.m" 2>&1
	probes=$("$out/usdt-toolexec" list "$out/$name.probed" | grep -c . || true)
	echo "== $mod ($target, $probes probes listed)"
	"$out/inlinecheck" "$out/$name.plain.m" "$out/$name.probed.m" || status=1
done
exit $status
