#!/usr/bin/env bash
# build-cost.sh measures what usdt-toolexec with a rules file costs a build:
# wall time, CPU time and peak memory of `go build` of a mid-size module,
# plain and through the wrapper, side by side.
#
# The module (golang.org/x/tools at VERSION, command TARGET, goimports by
# default) comes through the Go module proxy: `go mod download` fetches it
# into the module cache and it is copied into a temporary directory, where
# it is the main module. The configurations are:
#
#   plain    go build
#   wrapper  go build -toolexec=usdt-toolexec (no rules: the cost of
#            running every tool through the wrapper)
#   module   go build -toolexec="usdt-toolexec -rules module.yml": every
#            function of every package of the module (golang.org/x/tools/...)
#   json     as module, and also every function of encoding/json
#   std      as module, and also every function of the standard library
#            packages in STD (the parsers goimports runs, encoding/json,
#            strings, ...)
#
# For each run and configuration, in an order that rotates from run to run:
#
#   cold     fresh, empty GOCACHE (the standard library is compiled too) and
#            a fresh XDG_CACHE_HOME (usdt-toolexec caches the goroutine-id
#            offset of the toolchain and the tools' -V=full answers there)
#   warm     the same build again with the same cache, nothing changed (the
#            go command finds the executable up to date); REPEAT times
#   relink   the same again after deleting the executable: every package
#            comes from the cache, the link (and the wrapper's note writing)
#            runs again; REPEAT times
#
# Each build runs as `/usr/bin/time -v treerss -- go build ...`. time -v's
# "Maximum resident set size" is the largest single process of the build
# (the go command, one compile or the link), not their sum; treerss
# (internal/testing/benchauto/treerss) also samples the total RSS of the whole
# process tree every 50 ms and reports its peak. Wall and CPU (user+system,
# all processes) times come from treerss.
#
# Environment:
#   COUNT=3           cold builds of each configuration
#   REPEAT=5          warm builds and relinks after each cold build
#   CONFIGS="plain wrapper module json std"
#   VERSION=v0.52.0   version of golang.org/x/tools
#   TARGET=./cmd/goimports
#   STD="go/... encoding/json strings bytes strconv path/filepath"
#   CGO_ENABLED=0     for every build (route (a) of docs/providers.md)
#   OUT=              directory for the module copy, the caches and the
#                     results (a new temp dir if empty)
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
COUNT=${COUNT:-3}
REPEAT=${REPEAT:-5}
read -r -a configs <<<"${CONFIGS:-plain wrapper module json std}"
VERSION=${VERSION:-v0.52.0}
TARGET=${TARGET:-./cmd/goimports}
STD=${STD:-go/... encoding/json strings bytes strconv path/filepath}
export CGO_ENABLED=${CGO_ENABLED:-0}
export GOTOOLCHAIN=local
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/usdt-build-cost.XXXXXX")}
mkdir -p "$OUT/bin"
bin="$OUT/bin"
if [[ " ${configs[*]} " != *" plain "* ]]; then
	echo "CONFIGS must include plain" >&2
	exit 1
fi
if [[ ! -x /usr/bin/time ]]; then
	echo "/usr/bin/time is missing: apt-get install time" >&2
	exit 1
fi

echo "# building usdt-toolexec and treerss into $bin" >&2
go build -o "$bin/usdt-toolexec" ./cmd/usdt-toolexec
go build -o "$bin/treerss" ./internal/testing/benchauto/treerss

echo "# fetching golang.org/x/tools@$VERSION through the module proxy" >&2
dir=$(go mod download -json "golang.org/x/tools@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
if [[ -z $dir || ! -d $dir ]]; then
	echo "go mod download golang.org/x/tools@$VERSION gave no directory" >&2
	exit 1
fi
src="$OUT/src"
rm -rf "$src"
cp -r "$dir" "$src"
chmod -R u+w "$src"
# Download the dependencies the target needs (x/mod, x/sync), and count
# its packages.
(cd "$src" && go list -deps -f '{{if .Standard}}std{{else}}{{.Module.Path}}{{end}}' "$TARGET") | sort | uniq -c >"$OUT/packages.txt"

cat >"$OUT/module.yml" <<EOF
# Every function of every package of the module.
provider: tools
rules:
  - package: "golang.org/x/tools/..."
EOF
cp "$OUT/module.yml" "$OUT/json.yml"
echo '  - package: "encoding/json"' >>"$OUT/json.yml"
cp "$OUT/module.yml" "$OUT/std.yml"
for p in $STD; do
	printf '  - package: "%s"\n' "$p" >>"$OUT/std.yml"
done

flagsOf() {
	case $1 in
	plain) ;;
	wrapper) echo "-toolexec=$bin/usdt-toolexec" ;;
	module | json | std) echo "-toolexec=$bin/usdt-toolexec -rules $OUT/$1.yml" ;;
	*)
		echo "unknown configuration $1" >&2
		exit 1
		;;
	esac
}

results="$OUT/results.tsv"
printf 'config\tkind\trun\twall_s\tcpu_s\tmaxrss1_kb\ttreerss_kb\tsize_b\n' >"$results"

# build CONFIG KIND RUN CACHE XDG runs one timed build and appends its line.
build() {
	local cfg=$1 kind=$2 run=$3 cache=$4 xdg=$5 exe="$OUT/exe/$1" flag
	flag=$(flagsOf "$cfg")
	mkdir -p "$OUT/exe"
	rm -f "$OUT/time.txt" "$OUT/tree.txt"
	(
		cd "$src"
		GOCACHE=$cache XDG_CACHE_HOME=$xdg /usr/bin/time -v -o "$OUT/time.txt" \
			"$bin/treerss" -o "$OUT/tree.txt" -- go build ${flag:+"$flag"} -o "$exe" "$TARGET"
	)
	local maxrss
	maxrss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$OUT/time.txt")
	awk -v c="$cfg" -v k="$kind" -v r="$run" -v m="$maxrss" -v s="$(stat -c %s "$exe")" '{
		for (i = 1; i <= NF; i++) {
			split($i, kv, "=")
			x[kv[1]] = kv[2]
		}
		printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c, k, r, x["wall"], x["cpu"], m, x["treerss"], s
	}' "$OUT/tree.txt" | tee -a "$results" >&2
}

n=${#configs[@]}
for ((i = 1; i <= COUNT; i++)); do
	for ((k = 0; k < n; k++)); do
		# Rotate which configuration goes first.
		cfg=${configs[(i + k) % n]}
		echo "# run $i/$COUNT: $cfg" >&2
		cache="$OUT/cache"
		xdg="$OUT/xdg"
		rm -rf "$cache" "$xdg" "$OUT/exe/$cfg"
		mkdir -p "$cache" "$xdg"
		build "$cfg" cold "$i" "$cache" "$xdg"
		for ((r = 1; r <= REPEAT; r++)); do
			build "$cfg" warm "$i.$r" "$cache" "$xdg"
		done
		for ((r = 1; r <= REPEAT; r++)); do
			rm -f "$OUT/exe/$cfg"
			build "$cfg" relink "$i.$r" "$cache" "$xdg"
		done
		rm -rf "$cache" "$xdg"
	done
done

echo
echo "module: golang.org/x/tools@$VERSION $TARGET, CGO_ENABLED=$CGO_ENABLED, $(go version | cut -d' ' -f3-)"
echo "packages built, by module:"
sed 's/^/  /' "$OUT/packages.txt"
for cfg in module json std; do
	if [[ -x $OUT/exe/$cfg ]]; then
		"$bin/usdt-toolexec" list "$OUT/exe/$cfg" >"$OUT/probes-$cfg.txt"
		echo "$cfg: $(($(wc -l <"$OUT/probes-$cfg.txt") - 1)) probes in the executable"
	fi
done
echo "machine: $(nproc) CPUs, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "raw results: $results"
echo

# Medians over the runs, and ratios to plain of the same kind: the ratio of
# the medians, and the median of the per-run ratios (each build divided by
# the plain build of the same run and repetition, which ran within a minute
# of it, so that a noisy stretch of the machine affects both). Goals: cold
# at most 1.5x, warm at most 1.2x (wall time), peak memory at most 2x.
awk -F'\t' -v configs="${configs[*]}" "$SORTMED"'
NR > 1 {
	key = $1 SUBSEP $2
	k = ++cnt[key]
	run[key, k] = $3
	for (f = 4; f <= 8; f++) {
		v[key, f, k] = $f
		at[$1, $2, $3, f] = $f
	}
}
function med(key, f,    i, a) {
	for (i = 1; i <= cnt[key]; i++) {
		a[i] = v[key, f, i]
	}
	return sortmed(a, cnt[key])
}
# pairmed is the median over the runs of config c of field f divided by
# that of plain in the same run.
function pairmed(c, kind, f,    i, n, a, r, key) {
	key = c SUBSEP kind
	for (i = 1; i <= cnt[key]; i++) {
		r = run[key, i]
		if (("plain" SUBSEP kind SUBSEP r SUBSEP f) in at && at["plain", kind, r, f] > 0) {
			a[++n] = v[key, f, i] / at["plain", kind, r, f]
		}
	}
	return sortmed(a, n)
}
function ratio(x, b) {
	return b > 0 ? sprintf("%.2fx", x / b) : "-"
}
END {
	nc = split(configs, cs, " ")
	nk = split("cold warm relink", ks, " ")
	printf "medians (ratio: of the medians, to plain)\n"
	printf "%-7s %-7s %2s %23s %6s %23s %6s %11s %6s %11s %6s %8s %6s\n", "kind", "config", "n", "wall s (min..max)", "ratio", "cpu s (min..max)", "ratio", "maxrss1 MiB", "ratio", "treerss MiB", "ratio", "size MiB", "ratio"
	for (ki = 1; ki <= nk; ki++) {
		kind = ks[ki]
		for (f = 4; f <= 8; f++) {
			b[f] = med("plain" SUBSEP kind, f)
		}
		for (ci = 1; ci <= nc; ci++) {
			key = cs[ci] SUBSEP kind
			if (!cnt[key]) {
				continue
			}
			printf "%-7s %-7s %2d", kind, cs[ci], cnt[key]
			for (f = 4; f <= 8; f++) {
				m = med(key, f)
				if (f <= 5) {
					printf " %7.3f (%6.3f..%-6.3f) %6s", m, lo, hi, ratio(m, b[f])
				} else if (f <= 7) {
					printf " %11.0f %6s", m / 1024, ratio(m, b[f])
				} else {
					printf " %8.2f %6s", m / 1048576, ratio(m, b[f])
				}
				rm[cs[ci], kind, f] = b[f] > 0 ? m / b[f] : 0
			}
			printf "\n"
		}
	}

	printf "\nper-run ratios to plain of the same run (median, min..max)\n"
	printf "%-7s %-7s %20s %20s %20s %20s\n", "kind", "config", "wall", "cpu", "maxrss1", "treerss"
	for (ki = 1; ki <= nk; ki++) {
		kind = ks[ki]
		for (ci = 1; ci <= nc; ci++) {
			c = cs[ci]
			if (c == "plain" || !cnt[c SUBSEP kind]) {
				continue
			}
			printf "%-7s %-7s", kind, c
			for (f = 4; f <= 7; f++) {
				m = pairmed(c, kind, f)
				rp[c, kind, f] = m
				printf " %6.2fx (%4.2f..%4.2f)", m, lo, hi
			}
			printf "\n"
		}
	}

	printf "\ngoals: cold wall <= 1.5x, warm wall <= 1.2x, peak memory <= 2x (cold builds, both measures)\n"
	printf "(ratio of medians / median of per-run ratios)\n"
	for (ci = 1; ci <= nc; ci++) {
		c = cs[ci]
		if (c == "plain" || !cnt[c SUBSEP "cold"]) {
			continue
		}
		cw = rm[c, "cold", 4]
		ww = rm[c, "warm", 4]
		m1 = rm[c, "cold", 6]
		m2 = rm[c, "cold", 7]
		printf "  %-7s cold %.2fx / %.2fx %s, warm %.2fx / %.2fx %s, memory %.2fx %.2fx / %.2fx %.2fx %s\n", c,
			cw, rp[c, "cold", 4], verdict(cw, rp[c, "cold", 4], 1.5),
			ww, rp[c, "warm", 4], verdict(ww, rp[c, "warm", 4], 1.2),
			m1, m2, rp[c, "cold", 6], rp[c, "cold", 7], verdict(m1 > m2 ? m1 : m2, rp[c, "cold", 6] > rp[c, "cold", 7] ? rp[c, "cold", 6] : rp[c, "cold", 7], 2)
	}
}
function verdict(a, b, goal) {
	return a <= goal && b <= goal ? "met" : a > goal && b > goal ? "MISSED" : "borderline"
}' "$results"
