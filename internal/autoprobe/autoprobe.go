// Package autoprobe owns the names usdt-toolexec gives the probes it
// splices into functions: "entry__<pkg>__<Func>", "exit__<pkg>__<Type>__<Method>".
// The rewriter builds them, the link step renames those of packages that
// share a name, and the bpftrace script writer and the tracer read them.
// It also owns the name of a split function's traced copy, which holds
// the probes, and which the pprof exporter looks for in a binary.
package autoprobe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-usdt/usdt/internal/probe"
)

// Name is the automatic probe of kind ("entry" or "exit") for the function
// fn ("Func" or "Type.Method", or the fn part Split returns) of the package
// pkg: its name, or the import path where two packages of a binary share
// that name.
func Name(kind, pkg, fn string) string {
	return kind + "__" + probe.Ident(pkg) + "__" + probe.Ident(strings.ReplaceAll(fn, ".", "__"))
}

// KeptInlined is the kind of the record, in place of probes, of a
// function the compiler inlines that stays as written (rules' inline:
// keep): it has no notes, and usdt-toolexec list shows it as not probed.
const KeptInlined = "inlined"

// Split splits an automatic probe name "kind__pkg__Func" (or
// "kind__pkg__Type__Method").
func Split(name string) (kind, pkg, fn string, ok bool) {
	kind, rest, ok1 := strings.Cut(name, "__")
	pkg, fn, ok2 := strings.Cut(rest, "__")
	if !ok1 || !ok2 {
		return "", "", "", false
	}
	return kind, pkg, fn, true
}

// Label is the Go name of the function behind a probe's pkg and fn parts,
// main.Cache.Get, or given the probe's probe.Probe.Receiver, as Go's
// symbols name it: main.(*Cache).Get, main.List[...].Len. The probe name
// alone does not tell a pointer receiver from a value one.
func Label(pkg, fn, receiver string) string {
	typ, method, ok := cutLast(fn, "__")
	if receiver == "" || !ok {
		return pkg + "." + strings.ReplaceAll(fn, "__", ".")
	}
	typ = strings.ReplaceAll(typ, "__", ".")
	generic, ptr := strings.CutPrefix(receiver, "*")
	typ += generic
	if ptr {
		typ = "(*" + typ + ")"
	}
	return pkg + "." + typ + "." + method
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// TracedName is the nth name the rewriter tries for the traced copy of
// the function (or method) name it splits: Name_usdtTraced, then
// Name_usdtTraced1 and on while the package has that name already. An
// exported method's copy starts in lower case: in upper case it would
// join its type's method set, which reflection lists and interfaces of
// other packages could match.
func TracedName(name string, method bool, n int) string {
	if r, size := utf8.DecodeRuneInString(name); method && unicode.IsUpper(r) {
		name = string(unicode.ToLower(r)) + name[size:]
	}
	name += tracedSuffix
	if n > 0 {
		name += strconv.Itoa(n)
	}
	return name
}

const tracedSuffix = "_usdtTraced"

// SwitchName is the name of the traced copy that a rule with sites:
// switch gives the function (or method) name: usdtSwitched_Name. It keeps
// the name as written, so that no two functions' copies can share it,
// and a switch pairs a function with its copy by their names alone (for
// TracedName, the copies of First and first would both be
// first_usdtTraced); the prefix's lower case keeps a method's copy out
// of its type's method set.
func SwitchName(name string) string { return switchPrefix + name }

const switchPrefix = "usdtSwitched_"

// SwitchOf returns the function name whose SwitchName is name (not
// qualified), and whether it is one.
func SwitchOf(name string) (string, bool) { return strings.CutPrefix(name, switchPrefix) }

// TracedOf returns, for a name TracedName gives (qualified or not), the
// first name TracedName gives the same function's copy: the name without
// its number. It reports false for another name.
func TracedOf(name string) (string, bool) {
	first := strings.TrimRight(name, "0123456789")
	if !strings.HasSuffix(first, tracedSuffix) || first != name && name[len(first)] == '0' {
		return "", false
	}
	return first, true
}
