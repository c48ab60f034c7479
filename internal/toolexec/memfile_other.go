//go:build !linux

package toolexec

import (
	"errors"
	"os"
)

// memoryFile reports that memory files are Linux's: elsewhere the compile
// step writes the files it makes to disk.
func memoryFile(string) (*os.File, error) { return nil, errors.ErrUnsupported }
