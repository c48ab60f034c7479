#!/usr/bin/env bash
# Makes room on the disk for a test run (.ci/run runs it first). A run
# writes about DISK_NEED_GB: the Go build cache's instrumented builds
# (each rules file compiles the packages it probes anew), the tests'
# binaries and output, the VM images, and Jaeger's and Prometheus's
# builds and modules. A machine that keeps its disk between runs keeps
# the Go build cache too (the go command trims only entries unused for
# five days) and whatever a killed run left in /tmp, so this
#   - removes the go command's and the tests' temporary directories that
#     earlier runs left (untouched for DISK_STALE_MIN minutes);
#   - then, when less than DISK_NEED_GB is free, removes from the Go
#     build cache and usdt-toolexec's compile cache (~/.cache/usdt-toolexec,
#     which keeps entries for five days too) the entries the latest run
#     did not use (untouched for DISK_KEEP_MIN minutes before the newest
#     entry: the go command marks an entry used at most once an hour), so
#     that the next run starts warm;
#   - then, when that is not enough, empties both (go clean -cache: the
#     run rebuilds what it needs);
#   - then, when that is still not enough, says what holds the disk and
#     exits 1, before any test runs out of room halfway.
set -euo pipefail

# A run from a warm machine wrote 17 GB here (the Go build cache 9.7 GB
# of it, the compile cache 3.8 GB), with the tests' temporary files on
# top at their peak.
need=${DISK_NEED_GB:-30}
stale=${DISK_STALE_MIN:-120}
keep=${DISK_KEEP_MIN:-180}

free_gb() { df -BG --output=avail / | tail -1 | tr -dc 0-9; }

echo "disk: $(free_gb) GB free; a run needs about $need GB"
removed=0
while IFS= read -r -d '' d; do
	rm -rf "$d"
	removed=$((removed + 1))
done < <(find /tmp -mindepth 1 -maxdepth 1 \( -name 'go-build*' -o -name 'Test*' -o -name 'usdt-*' -o -name 'Fuzz*' \) -mmin +"$stale" -print0 2>/dev/null)
if ((removed > 0)); then
	echo "disk: removed $removed directories earlier runs left in /tmp; $(free_gb) GB free"
fi

go=$(command -v go || echo /usr/local/go/bin/go)
compile=${XDG_CACHE_HOME:-$HOME/.cache}/usdt-toolexec

# trim removes the files of directory $1 last modified more than $keep
# minutes before its newest.
trim() {
	[[ -d $1 ]] || return 0
	local newest n
	newest=$(find "$1" -type f -printf '%T@\n' 2>/dev/null | sort -n | tail -1)
	[[ -n $newest ]] || return 0
	n=$(find "$1" -type f ! -newermt "@$((${newest%.*} - keep * 60))" -print -delete 2>/dev/null | wc -l)
	echo "disk: removed $n entries of $1 that the latest run did not use; $(free_gb) GB free"
}

if (($(free_gb) < need)); then
	if [[ -x $go ]]; then
		trim "$("$go" env GOCACHE)"
	fi
	trim "$compile"
fi

if (($(free_gb) < need)); then
	if [[ -x $go ]]; then
		cache=$("$go" env GOCACHE)
		echo "disk: emptying the Go build cache ($(du -sh "$cache" 2>/dev/null | cut -f1) in $cache)"
		"$go" clean -cache
	fi
	if [[ -d $compile ]]; then
		echo "disk: emptying usdt-toolexec's compile cache ($(du -sh "$compile" 2>/dev/null | cut -f1) in $compile)"
		rm -rf "$compile"
	fi
	echo "disk: $(free_gb) GB free"
fi

if (($(free_gb) < need)); then
	echo "disk: only $(free_gb) GB free, and a run needs about $need GB; the largest directories:" >&2
	du -xh --max-depth=2 / 2>/dev/null | sort -rh | head -15 >&2
	echo "disk: hint: free space on /, or set DISK_NEED_GB lower to try anyway" >&2
	exit 1
fi
