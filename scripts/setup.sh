#!/usr/bin/env bash
# setup.sh makes a Debian machine ready for `make example` and `make test`,
# which run it first (make setup), as .ci/run does: it installs the real
# tracers and tools the end-to-end tests use, when missing, and mounts
# tracefs. With everything in place it changes nothing and takes no
# network (no apt-get update).
#
# It needs root for what is missing; run by another user, it prints the
# exact commands to run as root and fails. USDT_SETUP=skip skips it all:
# the tests that need a missing tracer then skip, saying why.
#
#   scripts/setup.sh          tracers from the machine's Debian release
set -euo pipefail

# What the tests run: bpftrace, bcc (tplist, trace), gdb, perf, readelf,
# sys/sdt.h for the C reference binaries, clang and libbpf for the libbpf
# consumer, the arm64 cross compiler and C library for the arm64 cgo
# builds and GCC's arm64 notes, debootstrap for the sid chroot of newer
# tracers (scripts/sid-chroot.sh) and the VM images (scripts/vm-images.sh),
# which also take kmod (depmod), qemu-user-static (the arm64 root's
# ldconfig) and lld (linking against the arm64 root), qemu to boot them
# and cpio to check the initramfs; make for .ci/run, which calls this
# before make exists; tmux for a terminal to type Ctrl-Z into; systemd for
# systemd-analyze, which checks the example unit of docs/service.md.
packages=(bpftrace bpfcc-tools gdb linux-perf binutils systemtap-sdt-dev clang libbpf-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross debootstrap kmod qemu-user-static lld qemu-system-x86 qemu-system-arm cpio make tmux systemd)
tracefs=/sys/kernel/tracing

# need prints the commands that would make the machine ready, one a line;
# nothing when it is.
need() {
	local missing=() p
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
	done
	if ((${#missing[@]})); then
		echo "apt-get update -qq"
		echo "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${missing[*]}"
	fi
	mountpoint -q "$tracefs" || echo "mount -t tracefs nodev $tracefs"
}

setup_base() {
	if [[ ${USDT_SETUP:-} == skip ]]; then
		echo "setup.sh: skipped (USDT_SETUP=skip): tests that need a missing tracer will skip" >&2
		return
	fi
	if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
		echo "setup.sh: not a Debian system: install ${packages[*]} (or your system's equivalents) and mount tracefs on $tracefs yourself" >&2
		return
	fi
	local todo
	todo=$(need)
	[[ -z $todo ]] && return
	if ((EUID != 0)); then
		{
			echo "setup.sh: the machine needs, as root:"
			sed 's/^/	/' <<<"$todo"
			echo "(or USDT_SETUP=skip to go on without them)"
		} >&2
		exit 1
	fi
	echo "setup.sh: running:" >&2
	sed 's/^/	/' <<<"$todo" >&2
	bash -euo pipefail -c "$todo" >/dev/null
	todo=$(need)
	if [[ -n $todo ]]; then
		echo "setup.sh: still missing after set-up:" >&2
		echo "$todo" >&2
		exit 1
	fi
}

case "${1:-}" in
"") setup_base ;;
# Other set-ups (such as a chroot with newer tracers) are added here as
# their own argument, with a make target of their own calling them.
*)
	echo "usage: scripts/setup.sh" >&2
	exit 2
	;;
esac
