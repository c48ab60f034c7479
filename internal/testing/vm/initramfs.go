package vm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// cpioFile is one entry of an initramfs.
type cpioFile struct {
	name string
	mode uint32 // type and permission bits, as in stat(2)
	rdev [2]uint32
	data []byte
}

const (
	modeDir  = 0o040000
	modeReg  = 0o100000
	modeChar = 0o020000
)

// writeCpio writes files as the "newc" cpio archive the kernel unpacks
// into its initial root. The kernel needs no compression and no
// particular order beyond directories before what they hold.
func writeCpio(w io.Writer, files []cpioFile) error {
	bw := bufio.NewWriter(w)
	pad := func(n int) {
		for ; n%4 != 0; n++ {
			bw.WriteByte(0)
		}
	}
	entry := func(ino int, f cpioFile) {
		name := strings.TrimPrefix(f.name, "/")
		fmt.Fprintf(bw, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, f.mode, 0, 0, 1, 0, len(f.data), 0, 0, f.rdev[0], f.rdev[1], len(name)+1, 0)
		bw.WriteString(name)
		bw.WriteByte(0)
		pad(110 + len(name) + 1)
		bw.Write(f.data)
		pad(len(f.data))
	}
	for i, f := range files {
		entry(i+1, f)
	}
	entry(0, cpioFile{name: "TRAILER!!!"})
	return bw.Flush()
}

// writeCpioFile writes the archive to path.
func writeCpioFile(path string, files []cpioFile) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeCpio(f, files); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
