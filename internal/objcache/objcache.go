// Package objcache reuses the compiler's output for the compiles that
// usdt-toolexec passes through unchanged.
//
// The wrapper's tool identity covers the rules (see toolexec's version),
// so that the go command never reuses a package instrumented under other
// rules. That identity is one per build, not per package: after any
// change of rules the go command compiles every package again, the
// standard library included, though the rules select none of it. A
// hello-world then takes 20 s instead of 1 s, and every test of this
// repository that writes rules of its own pays that for each.
//
// So the wrapper keeps, in its own directory of the user's cache, the
// output of each compile it passed through, under a hash of everything
// the output depends on: the compiler, the GO* environment, the working
// directory, the arguments with the build's temporary directory taken
// out, and the contents of every file the compile reads (the sources, and
// the export data, embedded files, ABI list and profile its configuration
// files name). The one thing that differs between such compiles is the
// build ID the go command passes, which the compiler writes into its
// output and the go command then finds there and rewrites, as
// cmd/go/internal/work's updateBuildID does: a reused output gets the new
// build ID in the old one's place, and is then what the compile would
// have written.
package objcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-usdt/usdt/internal/diskcache"
)

// Run runs a compile of args (run, writing to the writers it is given)
// or reuses the output of an earlier one of the same inputs. toolID is the
// compiler's own identity, its answer to -V=full.
func Run(toolID string, args []string, stdout, stderr io.Writer, run func(stdout, stderr io.Writer) error) error {
	c, ok := describe(toolID, args)
	if !ok {
		return run(stdout, stderr)
	}
	if c.reuse(stdout, stderr) {
		return nil
	}
	var out, errs bytes.Buffer
	if err := run(io.MultiWriter(stdout, &out), io.MultiWriter(stderr, &errs)); err != nil {
		return err
	}
	c.store(out.Bytes(), errs.Bytes())
	return nil
}

// compile is one compile the cache can answer.
type compile struct {
	key string
	// output and asmhdr are the files it writes, asmhdr empty without
	// -asmhdr; buildID is the -buildid it was given.
	output, asmhdr, buildID string
	// objdir and work are the build's directories for this package and
	// for the whole build, which differ from build to build.
	objdir, work string
}

// uncacheable are the compiler's flags that write files besides its
// output, or name inputs not hashed here.
var uncacheable = map[string]bool{
	"linkobj": true, "json": true, "coveragecfg": true, "cpuprofile": true,
	"memprofile": true, "blockprofile": true, "mutexprofile": true,
	"traceprofile": true, "bench": true, "I": true, "r": true,
}

// goCommandOnly are the GO* variables that the go command reads and the
// compiler does not: where things are kept and fetched from.
var goCommandOnly = map[string]bool{
	"GOCACHE": true, "GOMODCACHE": true, "GOPATH": true, "GOFLAGS": true,
	"GOTMPDIR": true, "GOPROXY": true, "GOSUMDB": true, "GONOSUMDB": true,
	"GOPRIVATE": true, "GONOPROXY": true, "GOINSECURE": true, "GOVCS": true,
	"GOWORK": true, "GOENV": true, "GOTOOLCHAIN": true, "GOTELEMETRY": true,
	"GOTELEMETRYDIR": true, "GOAUTH": true, "GOCACHEPROG": true,
}

// inputs are the compiler's flags that name a file it reads, each with
// how to hash what the compile takes from it.
var inputs = map[string]func(hash.Hash, string) bool{
	"importcfg": hashImportCfg, "embedcfg": hashEmbedCfg,
	"symabis": hashFile, "pgoprofile": hashFile,
}

// describe hashes everything the compile's output depends on; ok is
// false for a compile the cache does not answer.
func describe(toolID string, args []string) (c *compile, ok bool) {
	// Each flag with its value, given as -name value or -name=value, and
	// the positional arguments, the sources, with an empty name.
	type arg struct{ name, value string }
	var parsed []arg
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			parsed = append(parsed, arg{"", a})
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if uncacheable[name] {
			return nil, false
		}
		if !hasValue && (name == "o" || name == "buildid" || name == "asmhdr" || inputs[name] != nil) && i+1 < len(args) {
			i++
			value = args[i]
		}
		parsed = append(parsed, arg{name, value})
	}
	c = new(compile)
	for _, a := range parsed {
		switch a.name {
		case "o":
			c.output = a.value
		case "buildid":
			c.buildID = a.value
		case "asmhdr":
			c.asmhdr = a.value
		}
	}
	if c.output == "" || c.buildID == "" {
		return nil, false
	}
	c.objdir = filepath.Dir(c.output)
	c.work = filepath.Dir(c.objdir)
	wd, err := os.Getwd()
	if err != nil {
		return nil, false
	}
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s\n", len(s), s) }
	field("objcache 1")
	field(toolID)
	field(wd)
	var env []string
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(name, "GO") && !goCommandOnly[name] {
			env = append(env, e)
		}
	}
	slices.Sort(env)
	for _, e := range env {
		field(e)
	}
	for _, a := range parsed {
		switch {
		case a.name == "o" || a.name == "buildid":
		case inputs[a.name] != nil:
			field("-" + a.name)
			if !inputs[a.name](h, a.value) {
				return nil, false
			}
		case a.name == "":
			field(c.normalize(a.value))
			if strings.HasSuffix(a.value, ".go") && !hashFile(h, a.value) {
				return nil, false
			}
		default:
			field("-" + a.name + "=" + c.normalize(a.value))
		}
	}
	c.key = "obj-" + hex.EncodeToString(h.Sum(nil)[:20])
	return c, true
}

// normalize takes the build's directories out of s.
func (c *compile) normalize(s string) string {
	s = strings.ReplaceAll(s, c.objdir, "$OBJDIR")
	return strings.ReplaceAll(s, c.work, "$WORK")
}

func hashFile(h hash.Hash, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	n, err := io.Copy(h, f)
	fmt.Fprintf(h, "\n%d\n", n)
	return err == nil
}

// hashImportCfg hashes an import configuration, with each package file's
// content in place of its path, which is the build's.
func hashImportCfg(h hash.Hash, path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if spec, ok := strings.CutPrefix(line, "packagefile "); ok {
			pkg, file, ok := strings.Cut(strings.TrimSpace(spec), "=")
			if !ok {
				return false
			}
			fmt.Fprintf(h, "packagefile %s\n", pkg)
			if !hashExport(h, file) {
				return false
			}
			continue
		}
		io.WriteString(h, line)
	}
	return true
}

// hashExport hashes what a compile reads of a package archive: its export
// data (the first member, __.PKGDEF), without the build ID, which differs
// with the tool identity when nothing else does.
func hashExport(h hash.Hash, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	const magic, header = "!<arch>\n", 60
	head := make([]byte, len(magic)+header)
	if _, err := io.ReadFull(f, head); err != nil || string(head[:len(magic)]) != magic {
		return false
	}
	member := head[len(magic):]
	var size int64
	if _, err := fmt.Sscanf(string(member[48:58]), "%d", &size); err != nil || strings.TrimSpace(string(member[:16])) != "__.PKGDEF" || size > 1<<30 {
		return false
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return false
	}
	const idPrefix = "\nbuild id \""
	if i := bytes.Index(data, []byte(idPrefix)); i >= 0 {
		rest := data[i+len(idPrefix):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			data = slices.Concat(data[:i], rest[j:])
		}
	}
	fmt.Fprintf(h, "%d\n", len(data))
	h.Write(data)
	return true
}

// hashEmbedCfg hashes an embed configuration, with each embedded file's
// content beside its name.
func hashEmbedCfg(h hash.Hash, path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var cfg struct {
		Patterns map[string][]string
		Files    map[string]string
	}
	if json.Unmarshal(data, &cfg) != nil {
		return false
	}
	patterns, err := json.Marshal(cfg.Patterns)
	if err != nil {
		return false
	}
	h.Write(patterns)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cfg.Files {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		fmt.Fprintf(h, "\nfile %s\n", n)
		if !hashFile(h, cfg.Files[n]) {
			return false
		}
	}
	return true
}

// An entry is the build ID, the compiler's stdout and stderr (the
// build's directories taken out), the go_asm.h it wrote, and the package
// archive, each as a uvarint length and its bytes.
func (c *compile) store(stdout, stderr []byte) {
	obj, err := os.ReadFile(c.output)
	if err != nil || bytes.Contains(obj, []byte(c.work)) {
		return // an output that names this build's directory is its own
	}
	var hdr []byte
	if c.asmhdr != "" {
		if hdr, err = os.ReadFile(c.asmhdr); err != nil {
			return
		}
	}
	var b []byte
	for _, part := range [][]byte{[]byte(c.buildID), []byte(c.normalize(string(stdout))), []byte(c.normalize(string(stderr))), hdr, obj} {
		b = binary.AppendUvarint(b, uint64(len(part)))
		b = append(b, part...)
	}
	diskcache.Put(c.key, b)
	trim()
}

// reuse writes the stored output of the same compile, if there is one,
// as this compile would have.
func (c *compile) reuse(stdout, stderr io.Writer) bool {
	data, ok := diskcache.Get(c.key)
	if !ok {
		return false
	}
	var parts [5][]byte
	for i := range parts {
		n, w := binary.Uvarint(data)
		if w <= 0 || n > uint64(len(data)-w) {
			return false
		}
		parts[i], data = data[w:w+int(n)], data[w+int(n):]
	}
	old, out, errs, hdr, obj := parts[0], parts[1], parts[2], parts[3], parts[4]
	if len(old) != len(c.buildID) || len(data) != 0 {
		return false
	}
	obj = bytes.ReplaceAll(obj, old, []byte(c.buildID))
	if os.WriteFile(c.output, obj, 0o644) != nil {
		return false
	}
	if c.asmhdr != "" && os.WriteFile(c.asmhdr, hdr, 0o644) != nil {
		return false
	}
	restore := strings.NewReplacer("$OBJDIR", c.objdir, "$WORK", c.work)
	io.WriteString(stdout, restore.Replace(string(out)))
	io.WriteString(stderr, restore.Replace(string(errs)))
	diskcache.Touch(c.key)
	return true
}

// keep is how long an entry no build reused stays.
const keep = 5 * 24 * time.Hour

// trim removes the entries no build reused for keep, at most once a day.
func trim() {
	if !diskcache.Due("objcache-trimmed", 24*time.Hour) {
		return
	}
	diskcache.Remove("obj-", keep)
}
