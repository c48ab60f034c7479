// Package vm boots real Linux kernels under qemu to run tests on kernels
// and architectures other than the host's: Debian's own kernels, with a
// Debian root file system shared from the host over virtio-9p and a small
// static init (package vminit) that mounts it and runs one command.
//
// Booting takes an initramfs of a few megabytes and no disk image: the
// root is a directory (scripts/vm-images.sh builds them, with the kernels,
// once per machine), shared read-only, and a second directory is shared
// read-write for what the command reads and writes. KVM is used where it
// boots; TCG otherwise, which is slower but emulates any architecture.
package vm
