#!/usr/bin/env bash
# Builds, once per machine, what the VM tests (internal/testing/vm) boot
# under qemu: a Debian 12 root filesystem per architecture holding the
# tracers, shared read-only with the guest, and the kernels. It lives
# outside the repository; each part is reused when complete, and a
# half-built one is thrown away.
#
#   scripts/vm-images.sh           build what is missing
#   scripts/vm-images.sh --print   print the directory
#
# The directory is $USDT_VM_CACHE, default /var/cache/go-usdt/vm:
#
#   bookworm-amd64/, bookworm-arm64/   roots: bpftrace, gdb, libbpf, bcc's
#                                      tplist, perf; the
#                                      arm64 one is also the sysroot that
#                                      clang --target=aarch64-linux-gnu
#                                      -fuse-ld=lld links against
#   kernels/<suite>-<arch>/            vmlinuz, lib/modules/<release>/,
#                                      release: Debian 12's 6.1 and
#                                      Debian 11's 5.10 (amd64), as their archives
#                                      serve them now, updates included
#
# No foreign binary runs to build a root (installing an arm64 root under
# qemu-user takes 20 minutes): debootstrap's first stage only downloads,
# and the packages are unpacked here and the few maintainer-script steps
# the tools need are done by hand. Only ldconfig runs in the root, under
# qemu-user for arm64, and the tools' --version at the end, as a check.
set -euo pipefail

cache=${USDT_VM_CACHE:-/var/cache/go-usdt/vm}
arches=(amd64 arm64)
# libc6-dev and libgcc-12-dev make the root a sysroot for the libbpf loader
# the tests link on the host. debootstrap does not resolve virtual packages:
# libboost-regex1.74.0 provides gdb's libboost-regex1.74.0-icu72.
packages=(bpftrace gdb libbpf1 libbpf-dev libc6-dev libgcc-12-dev bpfcc-tools linux-perf libboost-regex1.74.0)

case "${1:-}" in
--print)
	echo "$cache"
	exit 0
	;;
"") ;;
*)
	echo "usage: scripts/vm-images.sh [--print]" >&2
	exit 2
	;;
esac

# machine_mirror LABEL DEFAULT prints the archive with that label the
# machine's apt uses (Debian, or Debian-Security), DEFAULT without one.
machine_mirror() {
	local uri
	uri=$(apt-get indextargets --format '$(REPO_URI) $(LABEL)' 2>/dev/null | awk -v l="$1" '$2 == l { print $1; exit }')
	echo "${uri:-$2}"
}

mirror=${DEBIAN_MIRROR:-$(machine_mirror Debian http://deb.debian.org/debian/)}
security=${DEBIAN_SECURITY_MIRROR:-$(machine_mirror Debian-Security http://deb.debian.org/debian-security/)}

qemu_arch() {
	case $1 in
	amd64) echo x86_64 ;;
	arm64) echo aarch64 ;;
	esac
}

# in_root ROOT ARCH COMMAND... runs a program of the root, natively in a
# chroot or under qemu-user for another architecture.
in_root() {
	local root=$1 arch=$2
	shift 2
	if [[ $arch == "$(dpkg --print-architecture)" ]]; then
		chroot "$root" "$@"
	else
		"qemu-$(qemu_arch "$arch")-static" -L "$root" "$root$1" "${@:2}"
	fi
}

# ldconfig_root ROOT ARCH writes the root's /etc/ld.so.cache with its own
# (static) ldconfig: the cache's flags are the architecture's.
ldconfig_root() {
	if [[ $2 == "$(dpkg --print-architecture)" ]]; then
		chroot "$1" /sbin/ldconfig
	else
		"qemu-$(qemu_arch "$2")-static" "$1/sbin/ldconfig" -r "$1"
	fi
}

mb() {
	du -scb "$@" | awk 'END { printf "%d MB", $1 / 1e6 }'
}

# build NAME FUNCTION ARGS... makes $cache/NAME with FUNCTION ARGS (which
# fills $partial) unless it is complete.
build() {
	local name=$1 dir=$cache/$1 start=$SECONDS
	local partial=$dir.partial
	shift
	[[ -e $dir/.complete ]] && return
	rm -rf --one-file-system "$dir" "$partial"
	mkdir -p "$partial"
	"$@"
	touch "$partial/.complete"
	mv "$partial" "$dir"
	echo "vm-images: built $name in $((SECONDS - start)) s, $(mb "$dir")"
}

# unmet_depends DEB... prints the dependencies of the packages that none of
# them satisfies by name or Provides (versions are not compared).
unmet_depends() {
	local deb
	for deb in "$@"; do
		dpkg-deb -f "$deb" Package Provides Pre-Depends Depends
		echo
	done | awk '
		function name(s) { sub(/^[ \t]+/, "", s); sub(/[ \t(:].*/, "", s); return s }
		/^(Package|Provides):/ { sub(/^[^:]*:/, ""); n = split($0, p, ","); for (i = 1; i <= n; i++) have[name(p[i])] = 1 }
		/^(Pre-)?Depends:/ { sub(/^[^:]*:/, ""); n = split($0, d, ","); for (i = 1; i <= n; i++) want[d[i]] = 1 }
		END {
			for (w in want) {
				m = split(w, alt, "|"); ok = 0
				for (i = 1; i <= m; i++) if (name(alt[i]) in have) ok = 1
				if (!ok) printf "%s ", name(w)
			}
		}'
}

root() {
	local arch=$1 debs=$partial/var/cache/apt/archives deb unmet
	debootstrap --foreign --arch="$arch" --variant=minbase \
		--include="$(IFS=,; echo "${packages[*]}")" \
		bookworm "$partial" "$mirror" >"$partial/debootstrap.out" ||
		{ tail -n 20 "$partial/debootstrap.out" >&2; exit 1; }
	# In a docker container debootstrap makes /proc a symlink to /proc,
	# which the guest's init would mount proc through and then loop on.
	if [[ -L $partial/proc ]]; then
		rm "$partial/proc"
		mkdir -m 555 "$partial/proc"
	fi
	echo "vm-images: $arch: downloaded $(ls "$debs"/*.deb | wc -l) packages, $(mb "$debs"/*.deb)"
	unmet=$(unmet_depends "$debs"/*.deb)
	if [[ -n $unmet ]]; then
		echo "vm-images: $arch: no package provides: $unmet (add their providers to packages)" >&2
		exit 1
	fi
	# debootstrap unpacked only the essential ones. The directory symlinks
	# of merged /usr (/bin -> usr/bin) stay, as with dpkg.
	for deb in "$debs"/*.deb; do
		dpkg-deb --fsys-tarfile "$deb" | tar -C "$partial" --keep-directory-symlink -xf -
	done
	rm -rf "$partial/debootstrap" "$partial/debootstrap.out" "$debs"/*.deb \
		"$partial"/usr/share/{doc,man,info,locale}
	# What the maintainer scripts would do that the tools and their users
	# rely on: users and groups (base-passwd), the name service (libc-bin),
	# awk and which (alternatives), the libraries' cache.
	cp "$partial/usr/share/base-passwd/passwd.master" "$partial/etc/passwd"
	cp "$partial/usr/share/base-passwd/group.master" "$partial/etc/group"
	cp "$partial/usr/share/libc-bin/nsswitch.conf" "$partial/etc/nsswitch.conf"
	ln -sf mawk "$partial/usr/bin/awk"
	ln -sf which.debianutils "$partial/usr/bin/which"
	ldconfig_root "$partial" "$arch"
	in_root "$partial" "$arch" /usr/bin/bpftrace --version
	in_root "$partial" "$arch" /usr/bin/gdb --version | sed -n 1p
	in_root "$partial" "$arch" /usr/bin/perf --version
	# tplist has no --version; its help means Python imported bcc, which
	# loaded libbcc.
	in_root "$partial" "$arch" /usr/bin/python3 /usr/sbin/tplist-bpfcc -h | sed -n 1p
}

# kernel_release DIR prints the release of the one kernel under DIR/boot.
kernel_release() {
	local v
	v=("$1"/boot/vmlinuz-*)
	((${#v[@]} == 1)) || { echo "vm-images: not one kernel in $1/boot: ${v[*]}" >&2; exit 1; }
	echo "${v[0]#"$1"/boot/vmlinuz-}"
}

# kernel_from SRC: the kernel unpacked under SRC, moved to $partial, with
# its modules' index.
kernel_from() {
	local src=$1 rel
	rel=$(kernel_release "$src")
	mkdir -p "$partial/lib/modules"
	mv "$src/boot/vmlinuz-$rel" "$partial/vmlinuz"
	mv "$src/lib/modules/$rel" "$partial/lib/modules/"
	[[ -e $partial/lib/modules/$rel/modules.dep ]] || depmod -b "$partial" "$rel"
	echo "$rel" >"$partial/release"
}

# archive_kernel SUITE ARCH: the kernel a Debian release installs today
# (its updates and security archives included: Debian 12's 6.1.176 fails
# to load libbpf 1.1's USDT programs, which 6.1.192 loads), through apt
# with a sources list, state and cache of its own.
archive_kernel() {
	local suite=$1 arch=$2 tmp=$partial.apt pkg
	mkdir -p "$tmp/state/lists/partial" "$tmp/cache/archives/partial" "$tmp/x"
	{
		local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
		echo "deb [signed-by=$keyring] $mirror $suite main"
		echo "deb [signed-by=$keyring] $mirror $suite-updates main"
		echo "deb [signed-by=$keyring] $security $suite-security main"
	} >"$tmp/sources.list"
	touch "$tmp/status"
	local apt=(-o Dir::Etc::sourcelist="$tmp/sources.list" -o Dir::Etc::sourceparts=-
		-o Dir::State="$tmp/state" -o Dir::State::status="$tmp/status" -o Dir::Cache="$tmp/cache"
		-o APT::Architecture="$arch" -o APT::Architectures="$arch"
		-o Acquire::Languages=none -o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root)
	apt-get "${apt[@]}" update -qq
	pkg=$(apt-cache "${apt[@]}" depends "linux-image-$arch" | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	(cd "$tmp" && apt-get "${apt[@]}" download -qq "$pkg")
	echo "vm-images: $suite-$arch: downloaded $pkg, $(mb "$tmp"/*.deb)"
	dpkg-deb -x "$tmp"/*.deb "$tmp/x"
	kernel_from "$tmp/x"
	rm -rf "$tmp"
}

start=$SECONDS
mkdir -p "$cache/kernels"
for arch in "${arches[@]}"; do
	build "bookworm-$arch" root "$arch"
	build "kernels/bookworm-$arch" archive_kernel bookworm "$arch"
done
# One kernel older than 6.1, for amd64: bullseye's security archive no
# longer serves its arm64 kernel (404), and each kernel adds 5 to 7
# minutes of emulated tests to make test.
build kernels/bullseye-amd64 archive_kernel bullseye amd64
echo "vm-images: $cache ready in $((SECONDS - start)) s"
