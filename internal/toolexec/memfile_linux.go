package toolexec

import (
	"os"

	"golang.org/x/sys/unix"
)

// memoryFile creates a file that lives in memory only, for a child
// process to inherit.
func memoryFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
