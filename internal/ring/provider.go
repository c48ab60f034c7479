package ring

import (
	"debug/elf"
	"encoding/binary"

	"github.com/go-usdt/usdt/internal/ringlayout"
)

// maxProviderProbes bounds a list's count, so that a word that happens
// to equal ProviderMagic in other data is not taken for a list.
const maxProviderProbes = 1 << 16

// ProviderSemaphores returns the link-time addresses of the semaphores of
// f's usdtgen probes that write to the ring: those whose packages this
// usdt-toolexec compiled, each listed behind ProviderMagic. A record of
// such a probe names its semaphore's address where an automatic probe's
// names its site. Probes of a package built otherwise (by an older
// usdt-toolexec, or with more arguments than the ring's writer takes in
// registers) are not listed: only BPF traces them.
func ProviderSemaphores(f *elf.File) map[uint64]bool {
	sems := map[uint64]bool{}
	le := binary.LittleEndian
	findMagic(f, ringlayout.ProviderMagic, func(b []byte, i int) bool {
		if i+16 > len(b) {
			return false
		}
		n := le.Uint64(b[i+8:])
		if n == 0 || n > maxProviderProbes || uint64(len(b)-i-16) < 8*n {
			return false
		}
		for k := range int(n) {
			sems[le.Uint64(b[i+16+8*k:])] = true
		}
		return false
	})
	return sems
}
