package toolexec

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-usdt/usdt/internal/diskcache"
)

// toolVersion answers `TOOL -V=full`, which the go command uses as the
// tool's identity in every cache key. Appending a hash of this wrapper and
// of the rules means that packages and executables built with another
// version of it, other rules, or without it, are never reused.
func (inv Invocation) version() error {
	answer, err := inv.realVersion()
	if err != nil {
		return err
	}
	self := InstrumenterID
	if self == "" {
		var err error
		if self, err = selfHash(); err != nil {
			return err
		}
	}
	id := self + "-rules-" + rulesIdentity(inv.Rules)
	line := strings.TrimRight(answer, "\n")
	// A development toolchain's answer must end in buildID=..., so the
	// wrapper's identity goes inside that last field.
	if i := strings.LastIndex(line, " buildID="); i >= 0 {
		fmt.Fprintf(inv.Stdout, "%s+usdt-toolexec-%s\n", line, id)
		return nil
	}
	fmt.Fprintf(inv.Stdout, "%s usdt-toolexec=%s\n", line, id)
	return nil
}

// InstrumenterID, when a build sets it (-ldflags=-X), stands for this
// executable's hash in the wrapper's identity. It must change whenever
// what the wrapper makes of a compile or a link may: this repository's
// tests set it to the Go build ID of this package, which covers its
// sources and those of every package it imports, and to a hash of the
// command's own files (instrumenterid.For). The tracer, which no build
// runs, is not part of it, so a change to the tracer alone leaves every
// instrumented build cached. Unset, as go install and go tool build it,
// the whole executable is the identity.
var InstrumenterID string

// realVersion is the tool's own answer to -V=full. It is cached on
// disk by the tool's path, size and modification time: every build asks,
// warm no-op builds included, and running the tool costs more than the
// rest of the wrapper. An -exec wrapper answers for the tool, adding its
// own identity, and is asked every time.
func (inv Invocation) realVersion() (string, error) {
	tool, args := inv.Tool, inv.Args
	key := ""
	if fi, err := os.Stat(tool); err == nil && len(inv.Exec) == 0 {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%q", tool, fi.Size(), fi.ModTime().UnixNano(), args))
		key = "toolid-" + hex.EncodeToString(sum[:16])
		if data, ok := diskcache.Get(key); ok && len(data) > 0 {
			return string(data), nil
		}
	}
	var out bytes.Buffer
	r := inv.Runner
	r.Stdout = &out
	if err := r.run(tool, args...); err != nil {
		return "", err
	}
	if key != "" {
		diskcache.Put(key, out.Bytes())
	}
	return out.String(), nil
}

// selfHash identifies this executable. The go command asks every tool for
// its identity on every build, warm ones included, so this is on the
// critical path of a no-op build: the Go build ID in the executable's note
// (a hash of its content, which the linker already computed) is read
// instead of hashing the whole file, unless the build ID was removed.
func selfHash() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if id := goBuildID(exe); id != "" {
		sum := sha256.Sum256([]byte(id))
		return hex.EncodeToString(sum[:12]), nil
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// goBuildID returns the Go build ID from an executable's .note.go.buildid,
// or "".
func goBuildID(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	data, err := s.Data()
	// namesz, descsz, type, "Go\x00\x00", then the ID.
	if err != nil || len(data) < 16 || string(data[12:16]) != "Go\x00\x00" {
		return ""
	}
	n := int(binary.LittleEndian.Uint32(data[4:8]))
	if n <= 0 || 16+n > len(data) {
		return ""
	}
	return string(data[16 : 16+n])
}

// expandResponseFiles replaces @file arguments, which the go command uses
// for long command lines, by the arguments they hold (one per line, with
// backslash escapes for newlines and backslashes).
func expandResponseFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "@")
		if !ok {
			out = append(out, a)
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			out = append(out, decodeArg(line))
		}
	}
	return out, nil
}

func decodeArg(s string) string {
	if !strings.ContainsRune(s, '\\') {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
