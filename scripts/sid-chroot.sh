#!/usr/bin/env bash
# Builds, once per machine, a Debian sid chroot holding a newer bpftrace
# (0.27 with libbpf 1.7 at the time of writing) so the end-to-end tests check
# the probes against it beside the host's. It lives outside the repository
# and is reused when complete; a half-built attempt is thrown away. Then it
# (re)makes the mounts the tests need: /proc, /sys (with tracefs), /dev, and
# /tmp, where go test puts the binaries it traces.
#
#   scripts/sid-chroot.sh            build if needed, mount
#   scripts/sid-chroot.sh --umount   undo the mounts
#
# The directory is $USDT_SID_CHROOT, default /var/cache/go-usdt/sid; the
# tests look there too (internal/testing/tracetest).
set -euo pipefail

dir=${USDT_SID_CHROOT:-/var/cache/go-usdt/sid}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
partial=$dir.partial
# bpftrace, and libbpf's BPF-side headers (usdt.bpf.h must match the libbpf
# that fills its maps) for the libbpf consumer test.
packages=(bpftrace libbpf-dev)

# mounts_under prints the mount points under $1, deepest first.
mounts_under() {
	awk -v p="$1/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r
}

umount_under() {
	local m
	for m in $(mounts_under "$1"); do
		umount -l "$m"
	done
}

mount_all() {
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
	mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
	# rbind, so tracefs and the BPF filesystem under /sys come along.
	mountpoint -q "$dir/sys" || { mount --rbind /sys "$dir/sys" && mount --make-rslave "$dir/sys"; }
	mountpoint -q "$dir/dev" || { mount --rbind /dev "$dir/dev" && mount --make-rslave "$dir/dev"; }
	mountpoint -q "$dir/tmp" || mount --bind /tmp "$dir/tmp"
}

if [[ ${1:-} == --umount ]]; then
	umount_under "$dir"
	exit 0
fi

if [[ ! -e $dir/.complete ]]; then
	umount_under "$dir"
	umount_under "$partial"
	rm -rf --one-file-system "$dir" "$partial"
	mkdir -p "$(dirname "$dir")"
	start=$SECONDS
	# minbase plus the packages and what they depend on; debootstrap
	# resolves the dependencies of --include.
	debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" sid "$partial" "$mirror"
	umount_under "$partial"
	chroot "$partial" apt-get clean
	touch "$partial/.complete"
	mv "$partial" "$dir"
	echo "sid-chroot: built $dir in $((SECONDS - start)) s"
fi
mount_all
# A chroot built when the list was shorter gets what it lacks.
missing=()
for p in "${packages[@]}"; do
	chroot "$dir" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	# The machine clock may be past the archive's Valid-Until.
	chroot "$dir" apt-get -o Acquire::Check-Valid-Until=false update -qq
	DEBIAN_FRONTEND=noninteractive chroot "$dir" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	chroot "$dir" apt-get clean
fi
chroot "$dir" bpftrace --version
