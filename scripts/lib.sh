# Sourced by the benchmark scripts (bench.sh, bench-auto.sh, fire-measure.sh,
# build-cost.sh) for what their summaries share, and by jaeger.sh and
# prometheus.sh for their builds once per machine.

# SORTMED is an awk function to put in front of a summary program:
# sortmed(a, k) sorts a[1..k] numerically and returns its median, or ""
# when k is 0, and sets the globals lo and hi to the extremes.
# shellcheck disable=SC2034 # used by the scripts that source this file
SORTMED='
function sortmed(a, k,    i, j, t) {
	if (!k) {
		return ""
	}
	for (i = 2; i <= k; i++) {
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] > t; j--) {
			a[j + 1] = a[j]
		}
		a[j + 1] = t
	}
	lo = a[1]
	hi = a[k]
	return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
'

# find_benchstat sets the array benchstat to a benchstat command: the one on
# PATH, else `go run golang.org/x/perf/cmd/benchstat@latest`. It stays
# empty when $BENCHSTAT is 0, no or false, or when neither works (saying
# so).
find_benchstat() {
	benchstat=()
	case ${BENCHSTAT:-auto} in
	0 | no | false) ;;
	*)
		if command -v benchstat >/dev/null; then
			benchstat=(benchstat)
		elif go run golang.org/x/perf/cmd/benchstat@latest -h >/dev/null 2>&1; then
			benchstat=(go run golang.org/x/perf/cmd/benchstat@latest)
		else
			echo
			echo "(benchstat unavailable: only the summary above)"
		fi
		;;
	esac
}

# fetch_module MODULE@VERSION DIR copies a module's source from the module
# proxy into DIR, writable, with its dependencies downloaded.
fetch_module() {
	local src
	src=$(go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	rm -rf "$2"
	cp -r "$src" "$2"
	chmod -R u+w "$2"
	(cd "$2" && go mod download)
}

# build_cached_binary NAME DIR MODULE VERSION PKG [GO BUILD FLAGS...] builds,
# once per machine, the command PKG of MODULE@VERSION (from the Go module
# proxy) as DIR/NAME. A complete build is marked by DIR/.complete holding
# VERSION and is reused; a half-built attempt (DIR.partial) is thrown away.
# It builds inside the module, from the proxy's copy, with GOWORK=off:
# go install PKG@VERSION refuses a go.mod with replace directives, and a
# go.work may name directories the module leaves out. (The copy's path is
# asked from /, so that no go.mod around gets the module in its go.sum.)
build_cached_binary() {
	local name=$1 dir=$2 module=$3 version=$4 pkg=$5
	shift 5
	local partial=$dir.partial start=$SECONDS src
	if [[ -e $dir/.complete ]] && [[ $(cat "$dir/.complete") == "$version" ]]; then
		echo "$name: $dir/$name ($version) is built"
		return 0
	fi
	rm -rf "$dir" "$partial"
	mkdir -p "$partial"
	src=$(cd / && go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	(cd "$src" && GOWORK=off CGO_ENABLED=0 go build -trimpath "$@" -o "$partial/$name" "$pkg")
	echo "$version" >"$partial/.complete"
	mv "$partial" "$dir"
	echo "$name: built $dir/$name in $((SECONDS - start)) s, $(du -h "$dir/$name" | cut -f1)"
}
