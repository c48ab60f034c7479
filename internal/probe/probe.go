// Package probe is the vocabulary shared by every part of the tool chain: a
// USDT probe, its arguments and the handful of machine kinds an argument can
// have once it reaches the probe's NOP. Parsers produce these values, code
// generators and the link-time note writer consume them.
package probe

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxArgs is the most arguments a stapsdt note may describe; every consumer
// (bcc, bpftrace, perf, gdb) stops there.
const MaxArgs = 12

// CStringMax is the most bytes of a string argument a probe passes, before
// its NUL: the rewriter's generated code cuts strings there and the tracer
// reads that many. The runtime package's CStringMax, which usdtgen's code
// cuts them at, is the same number written out: importing this package
// would link fmt and regexp into every instrumented program.
const CStringMax = 256

// Unreadable begins what a probe passes for a string argument whose bytes
// it could not read (the program unmapped or freed them, or a data race
// tore the string's header): "<unreadable 0x", the bytes' address in
// lower-case hex, then ">". The rewriter's generated code writes it, and
// the runtime package's CString writes the same text out.
const Unreadable = "<unreadable 0x"

// ParseUnreadable returns the address a string argument's Unreadable text
// names, and false for any other string.
func ParseUnreadable(s string) (uint64, bool) {
	hex, ok := strings.CutPrefix(s, Unreadable)
	if !ok {
		return 0, false
	}
	hex, ok = strings.CutSuffix(hex, ">")
	if !ok || hex == "" || len(hex) > 16 {
		return 0, false
	}
	var addr uint64
	for _, c := range []byte(hex) {
		switch {
		case c >= '0' && c <= '9':
			addr = addr<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			addr = addr<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return addr, true
}

// Sentinel is the identifier usdtgen's no-cgo file refers to and only
// usdt-toolexec defines: a build that would silently lose the probe notes
// (Go's internal linker drops them) fails to compile instead, naming the
// fix.
const Sentinel = "usdtgen_probes_need__go_build_toolexec_usdt_toolexec__or__CGO_ENABLED_1"

// NoCgoSuffix ends the name of the file that refers to Sentinel; the
// wrapper looks for it by name so that it never has to read other files.
const NoCgoSuffix = "_usdt_nocgo.go"

// Kind is how an argument is laid out where the probe fires.
type Kind int

const (
	Invalid Kind = iota
	Int8
	Uint8
	Int16
	Uint16
	Int32
	Uint32
	Int64
	Uint64
	Uintptr
	Bool
	// String is a Go string passed as a pointer to a NUL-terminated copy,
	// so that bpftrace's str(argN) reads it.
	String
	// Pointer is any address: unsafe.Pointer, or a map, channel or func value.
	Pointer
)

var kindInfo = [...]struct {
	name   string
	goType string
	size   int
	signed bool
}{
	Invalid: {"invalid", "", 0, false},
	Int8:    {"int8", "int8", 1, true},
	Uint8:   {"uint8", "uint8", 1, false},
	Int16:   {"int16", "int16", 2, true},
	Uint16:  {"uint16", "uint16", 2, false},
	Int32:   {"int32", "int32", 4, true},
	Uint32:  {"uint32", "uint32", 4, false},
	Int64:   {"int64", "int64", 8, true},
	Uint64:  {"uint64", "uint64", 8, false},
	Uintptr: {"uintptr", "uintptr", 8, false},
	Bool:    {"bool", "bool", 1, false},
	String:  {"string", "string", 8, false},
	Pointer: {"pointer", "unsafe.Pointer", 8, false},
}

func (k Kind) valid() bool { return k > Invalid && int(k) < len(kindInfo) }

func (k Kind) String() string {
	if !k.valid() {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindInfo[k].name
}

// KindNamed is the kind whose String is name.
func KindNamed(name string) (Kind, bool) {
	for k := Invalid + 1; k.valid(); k++ {
		if k.String() == name {
			return k, true
		}
	}
	return Invalid, false
}

// GoType is the Go type a generated probe function takes for this kind.
func (k Kind) GoType() string { return kindInfo[k].goType }

// Size is the argument's width in bytes as the note declares it. Strings and
// pointers are 8: this tool only targets 64-bit Linux.
func (k Kind) Size() int { return kindInfo[k].size }

// Signed reports whether the note marks the argument signed ("-N@...").
func (k Kind) Signed() bool { return kindInfo[k].signed }

// Arg is one probe argument. Consumers of the note only ever see
// positions; the probe table carries Name and Type so that a tracer can
// show them.
type Arg struct {
	// Name is the argument's name as declared: "_" for a blank Go
	// parameter, empty for an unnamed one.
	Name string
	// Type is the Go type the value has where it is declared, qualified by
	// package name, not path (context.Context); empty where unknown.
	Type string
	Kind Kind
	// Layout is how a value of Type lies in memory, encoded by
	// internal/layout: for the arguments passed as an address, a pointer
	// or a map, so that a tracer can read the value; empty for the rest
	// and in tables older than layouts.
	Layout string
}

// Probe is one probe, from the declaration that makes it to the note that
// describes it. Provider and Name are kept exactly as declared: they are what
// `bpftrace -l` shows. The parser or rewriter fills in what the declaration
// says; Spec and Slot come with the code generated for an architecture, and
// Package, PC and Semaphore from the linked executable's probe table.
type Probe struct {
	Provider string
	Name     string
	Args     []Arg
	// Dropped are declared arguments the note has no room for, in order
	// after Args: the probe does not pass them.
	Dropped []Arg
	// Receiver is what Go's name for the method an automatic probe
	// instruments has that the probe name lacks: "*" for a pointer
	// receiver ((*Cache).Get), "[...]" for a generic type
	// (List[...].Len), "*[...]" for both. It is empty for functions,
	// plain value receivers and usdtgen's probes.
	Receiver string

	// Spec is the stapsdt argument spec ("8@%rax -4@%rbx").
	Spec string
	// Slot is the index of the probe's semaphore in its table's semaphore
	// array; probes with the same slot share the semaphore.
	Slot int

	// Package is the import path of the package usdt-toolexec
	// instrumented, empty for usdtgen's probes.
	Package string
	// PC is the link-time address of the probe's NOP, Semaphore that of
	// its semaphore (the Slot-th of its table).
	PC, Semaphore uint64
	// WideSemaphore says that Semaphore is the low half of a 32-bit
	// slot (an automatic probe's, probetable's WideFlag), whose high
	// half the in-process ring's tracer sets: the probe's gate loads
	// both.
	WideSemaphore bool

	// Func, for a note-only probe (rules' sites: notes), is the linker's
	// name of the function whose own instructions the probe's notes
	// point at; such a probe has no NOP and no semaphore of its own.
	Func string
}

// Escaped returns p with the names and types its table gives it
// (Provider, Name, Package, Receiver, and each argument's Name and Type)
// passed through escape, for showing them: a binary nobody vouches for
// may hold any bytes there, control characters among them. Layouts,
// Spec and Func, which are read, not shown, stay as they are.
func (p Probe) Escaped(escape func(string) string) Probe {
	args := func(as []Arg) []Arg {
		if as == nil {
			return nil
		}
		out := make([]Arg, len(as))
		for i, a := range as {
			a.Name, a.Type = escape(a.Name), escape(a.Type)
			out[i] = a
		}
		return out
	}
	p.Provider, p.Name, p.Package, p.Receiver = escape(p.Provider), escape(p.Name), escape(p.Package), escape(p.Receiver)
	p.Args, p.Dropped = args(p.Args), args(p.Dropped)
	return p
}

// Kinds are the kinds of p's arguments, in order.
func (p Probe) Kinds() []Kind {
	ks := make([]Kind, len(p.Args))
	for i, a := range p.Args {
		ks[i] = a.Kind
	}
	return ks
}

// Params shows p's arguments as a Go parameter list does, "name type": a
// blank one as "_ T", an unnamed one as its type alone. An argument whose
// name and type are unknown (its table predates names, or the probe has no
// table) shows as "argN", N its position in the note, and its kind when
// known. Dropped arguments follow "dropped:".
func (p Probe) Params() string {
	show := func(i int, a Arg) string {
		switch {
		case a.Type == "" && a.Name == "" && a.Kind.valid():
			return fmt.Sprintf("arg%d %s", i, a.Kind.GoType())
		case a.Type == "" && a.Name == "":
			return fmt.Sprintf("arg%d", i)
		case a.Name == "":
			return a.Type
		}
		return strings.TrimSpace(a.Name + " " + a.Type)
	}
	var out []string
	for i, a := range p.Args {
		out = append(out, show(i, a))
	}
	if len(p.Dropped) > 0 {
		var dropped []string
		for i, a := range p.Dropped {
			dropped = append(dropped, show(len(p.Args)+i, a))
		}
		out = append(out, "dropped: "+strings.Join(dropped, ", "))
	}
	return strings.Join(out, ", ")
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether s may be a provider or probe name: every consumer
// accepts [A-Za-z_][A-Za-z0-9_]*, and perf rejects anything else.
func ValidName(s string) bool { return identRE.MatchString(s) }

// Ident makes s usable inside a probe name or a Go or C identifier: every
// character outside [A-Za-z0-9_] becomes '_'.
func Ident(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
