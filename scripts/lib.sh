# Sourced by the benchmark scripts (bench.sh, bench-auto.sh, fire-measure.sh,
# build-cost.sh, ...) for what their summaries share, the modules and the
# Jaeger they run, and the servers they wait for, and by jaeger.sh and
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

# start_jaeger DIR QUERY GRPC HTTP starts the Jaeger that scripts/jaeger.sh
# builds once per machine (built first if it is not), on loopback and in
# memory, as the end-to-end tests start it (their jaeger.yaml), its API
# on port QUERY and OTLP on GRPC and HTTP; its log goes to DIR/jaeger.txt.
# It sets jaegerpid, and returns once the API answers (60 s at most).
start_jaeger() {
	local dir=$1 jaeger
	scripts/jaeger.sh >/dev/null
	jaeger=${USDT_JAEGER_DIR:-/var/cache/go-usdt/jaeger}/jaeger
	# shellcheck disable=SC2059 # the file is the format: its ports are verbs
	printf "$(cat internal/testing/e2e/testdata/jaeger.yaml)\n" "$2" "$3" "$4" >"$dir/jaeger.yaml"
	"$jaeger" --config "$dir/jaeger.yaml" >"$dir/jaeger.txt" 2>&1 &
	jaegerpid=$!
	for _ in $(seq 300); do
		curl -fsS -o /dev/null "http://127.0.0.1:$2/api/services" 2>/dev/null && return 0
		sleep 0.2
	done
	kill "$jaegerpid" 2>/dev/null || true
	echo "Jaeger did not answer on port $2 within 60 s:" >&2
	cat "$dir/jaeger.txt" >&2
	return 1
}

# listening_addr LOG SECONDS waits up to SECONDS for a server (such as
# scripts/testdata/jsonapi) to write "listening on ADDR" into LOG, and
# prints ADDR; it prints nothing when the line did not come.
listening_addr() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		grep -q '^listening on' "$1" && break
		sleep 0.1
	done
	awk '/^listening on/ { print $3; exit }' "$1"
}

# turns PASS MODE... prints the modes, one a line, in pass PASS's order:
# as given on odd passes, reversed on even ones, so that no mode always
# runs first or last (a cache warmed, a CPU cooled).
turns() {
	local pass=$1 i
	shift
	if ((pass % 2)); then
		printf '%s\n' "$@"
	else
		for ((i = $#; i >= 1; i--)); do printf '%s\n' "${!i}"; done
	fi
}

# build_jsonapi TOOLS DIR builds the tracer (usdt-toolexec and
# usdt-export) into TOOLS, and with that wrapper the JSON API server
# (scripts/testdata/jsonapi) into DIR/jsonapi, every function of net/http
# probed by the rules in DIR/jsonapi.yml. The benchmarks of a service
# (bench-sampled.sh, bench-idle.sh, soak.sh) run it.
build_jsonapi() {
	go build -o "$1/" ./cmd/usdt-toolexec ./cmd/usdt-export
	printf 'rules:\n  - package: "net/http"\n' >"$2/jsonapi.yml"
	(cd scripts/testdata/jsonapi && go build -toolexec="$1/usdt-toolexec -rules $2/jsonapi.yml" -o "$2/jsonapi" .)
}
