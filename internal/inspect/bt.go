package inspect

import (
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/go-usdt/usdt/internal/autoprobe"
	"github.com/go-usdt/usdt/internal/probe"
)

// bpftraceLimit is bpftrace's default for both BPFTRACE_MAX_PROBES and
// BPFTRACE_MAX_BPF_PROGS: a script with more probes does not load unless
// they are raised.
const bpftraceLimit = 512

// libbpfUSDTLimit is the most USDT probes a script attaches under a
// bpftrace built on libbpf's USDT support (0.27.1 measured): libbpf's
// table of argument specs holds 256 (BPF_USDT_MAX_SPEC_CNT), and past it
// attaching fails with "Argument list too long".
const libbpfUSDTLimit = 256

// bt prints a starter bpftrace script for a binary's automatic probes: a
// latency histogram per function, from its exit probe alone, whose arg1 is
// the nanoseconds since the same call's entry. patterns, if any, keep the
// functions whose name (pkg.Func, pkg.Type.Method, or as Go names a
// method, pkg.(*Type).Method) or exit probe name matches one of them as a
// path.Match glob. warn gets what the user must do
// for the script to load.
func BT(bin string, patterns []string, w, warn io.Writer) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("bad pattern %q: %v (a glob such as 'orders.*' or 'exit__orders__*')", p, err)
		}
	}
	notes, byPC, err := readProbes(bin)
	if err != nil {
		return err
	}
	type fn struct {
		provider, exit, label, attrs string
		// notes says the function's sites are notes (sites: notes):
		// its exit probe's arg1 is 0, so the script times the call
		// from its entry.
		notes bool
	}
	var fns []fn
	listed := map[string]bool{} // a note-only exit probe has a note per return
	entries := map[string]probe.Probe{}
	for _, n := range notes {
		if kind, pkg, name, ok := autoprobe.Split(n.Name); ok && kind == "entry" {
			entries[n.Provider+":"+autoprobe.Name("exit", pkg, name)] = byPC[n.PC]
		}
	}
	// A name a probe may not have would be script text: the script
	// leaves its probe out (readProbes escaped the names, so that
	// control characters show as \x1b and are not valid either).
	var refused []string
	for _, n := range notes {
		kind, pkg, name, ok := autoprobe.Split(n.Name)
		if !ok || kind != "exit" || listed[n.Provider+":"+n.Name] {
			continue
		}
		listed[n.Provider+":"+n.Name] = true
		if !probe.ValidName(n.Provider) || !probe.ValidName(n.Name) {
			refused = append(refused, fmt.Sprintf("%s:%s", n.Provider, n.Name))
			continue
		}
		f := fn{provider: n.Provider, exit: n.Name, label: autoprobe.Label(pkg, name, byPC[n.PC].Receiver), notes: byPC[n.PC].Func != ""}
		f.attrs = attributeReads(entries[n.Provider+":"+n.Name])
		if selected(patterns, f.label, autoprobe.Label(pkg, name, ""), f.exit) {
			fns = append(fns, f)
		}
	}
	if len(refused) > 0 {
		shown := refused[:min(len(refused), 3)]
		if len(refused) > len(shown) {
			shown = append(shown, fmt.Sprintf("and %d more", len(refused)-len(shown)))
		}
		fmt.Fprintf(warn, "usdt-toolexec bt: %s: the script leaves out %d exit probes whose provider or name is not an identifier ([A-Za-z_][A-Za-z0-9_]*), which bpftrace could not attach by and which could write into the script: %s\n", bin, len(refused), strings.Join(shown, ", "))
	}
	if len(fns) == 0 {
		if len(refused) > 0 {
			return fmt.Errorf("%s: no exit__ probe has a name the script can hold (usdt-toolexec list %s shows them)", bin, bin)
		}
		if len(patterns) > 0 {
			return fmt.Errorf("%s: no exit__ probe matches %s (patterns match pkg.Func, pkg.Type.Method or the probe name; see usdt-toolexec list %s)", bin, strings.Join(patterns, " "), bin)
		}
		return fmt.Errorf("%s: no function has an exit__ probe (build it with usdt-toolexec and a rules file)", bin)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].label < fns[j].label })
	// bpftrace 0.17 fails to load one map keyed on string literals of
	// different lengths ("misaligned stack access"): every label is padded
	// to the longest.
	width := 0
	seen := map[string]bool{}
	for i := range fns {
		fns[i].label = shorten(fns[i].label, seen)
		width = max(width, len(fns[i].label))
	}
	fmt.Fprintf(w, "// Latency of %d instrumented functions of %s, in microseconds.\n", len(fns), bin)
	run := fmt.Sprintf("bpftrace THIS_FILE -c '%s'   (or -p PID)", bin)
	if len(fns) > bpftraceLimit {
		env := fmt.Sprintf("BPFTRACE_MAX_PROBES=%d BPFTRACE_MAX_BPF_PROGS=%d", len(fns), len(fns))
		run = env + " " + run
		fmt.Fprintf(warn, "usdt-toolexec: the script has %d probes, more than bpftrace's default limit of %d: run it with %s, or narrow it with patterns (usdt-toolexec bt BINARY PATTERN...)\n", len(fns), bpftraceLimit, env)
	}
	fmt.Fprintf(w, "// usage: %s\n", run)
	if len(fns) > libbpfUSDTLimit {
		tooMany := fmt.Sprintf("the script has %d probes, and bpftrace versions built on libbpf's USDT support (0.27.1 measured: \"Failed to attach usdt probe: Argument list too long\") attach at most %d USDT probes per script: narrow it with patterns (usdt-toolexec bt BINARY PATTERN...), or count them all with usdt-toolexec trace -stats", len(fns), libbpfUSDTLimit)
		fmt.Fprintf(warn, "usdt-toolexec: %s\n", tooMany)
		fmt.Fprintf(w, "// WARNING: %s.\n", tooMany)
	}
	fmt.Fprintf(w, "// An exit probe's arg1 is the nanoseconds since the same call's entry: no\n// entry probe, no pairing, recursion and panics included.\n")
	if slices.ContainsFunc(fns, func(f fn) bool { return f.notes }) {
		fmt.Fprintf(w, "// Except where the probes are notes on the function's own code (sites:\n// notes): arg1 is 0 there, and the entry's time is kept per goroutine\n// (arg0) instead, which a recursive call overwrites.\n")
	}
	// The start is kept signed and the difference cast: bpftrace 0.27
	// takes nsecs - nsecs as signed, and warns otherwise. An exit zeroes
	// the start rather than deleting it, whose result 0.27 warns is
	// discarded and 0.17 does not give; END clears the maps.
	var starts []string
	for i, f := range fns {
		if f.notes {
			entry := strings.Replace(f.exit, "exit__", "entry__", 1)
			label := btString(fmt.Sprintf("%-*s", width, f.label))
			fmt.Fprintf(w, "\nusdt:%[1]s:%[2]s:%[3]s\n{\n\t@start%[4]d[arg0] = (int64)nsecs;\n}\n\nusdt:%[1]s:%[2]s:%[5]s\n/@start%[4]d[arg0]/\n{\n\t@us[%[6]s] = hist((uint64)((int64)nsecs - @start%[4]d[arg0]) / 1000);\n\t@start%[4]d[arg0] = 0;\n}\n",
				bin, f.provider, entry, i, f.exit, label)
			starts = append(starts, fmt.Sprintf("@start%d", i))
			continue
		}
		fmt.Fprintf(w, "\nusdt:%s:%s:%s\n{\n\t@us[%s] = hist((uint64)arg1 / 1000);\n}\n", bin, f.provider, f.exit, btString(fmt.Sprintf("%-*s", width, f.label)))
		if f.attrs != "" {
			fmt.Fprintf(w, "// %s's attributes, at usdt:%s:%s:%s: %s\n", f.label, bin, f.provider, strings.Replace(f.exit, "exit__", "entry__", 1), f.attrs)
		}
	}
	if len(starts) > 0 {
		fmt.Fprintf(w, "\nEND\n{\n")
		for _, m := range starts {
			fmt.Fprintf(w, "\tclear(%s);\n", m)
		}
		fmt.Fprintf(w, "}\n")
	}
	return nil
}

// btString is s as a bpftrace string literal whose value is s: quoted,
// its quotes and backslashes escaped. s holds no control character
// (readProbes escaped the names), so a label's \x1b stays those four
// characters, as trace shows it, and bpftrace prints no escape sequence.
func btString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// attributeReads says how bpftrace reads the attributes a rule gave an
// entry probe (its arguments whose names have a namespace, which a Go
// parameter's cannot), "" when it has none.
func attributeReads(p probe.Probe) string {
	var reads []string
	for i, a := range p.Args {
		if !strings.Contains(a.Name, ".") || a.Name == "usdt.panic" {
			continue
		}
		read := fmt.Sprintf("arg%d", i)
		switch {
		case a.Kind == probe.String:
			read = "str(" + read + ")"
		case a.Kind.Signed():
			read = "(int64)" + read
		case a.Kind == probe.Pointer && a.Layout != "":
			read += " (the value's address)"
		}
		reads = append(reads, a.Name+" "+read)
	}
	return strings.Join(reads, ", ")
}

// selected reports whether a function passes the patterns: all do when
// there are none.
func selected(patterns []string, names ...string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		for _, n := range names {
			if ok, _ := path.Match(p, n); ok {
				return true
			}
		}
	}
	return false
}

// maxLabel is the longest string literal bpftrace 0.17 accepts ("String is
// too long (over 64 bytes)" with the NUL).
const maxLabel = 63

// shorten returns label, or if it is longer than maxLabel, its start and
// end around a marker that makes it differ from every label in seen, to
// which it adds the result.
func shorten(label string, seen map[string]bool) string {
	short := label
	for n := 0; len(short) > maxLabel || seen[short]; n++ {
		mid := "..."
		if n > 0 {
			mid = fmt.Sprintf(".%d.", n)
		}
		tail := (maxLabel - len(mid)) / 2
		short = label[:min(len(label), maxLabel-len(mid)-tail)] + mid + label[max(0, len(label)-tail):]
	}
	seen[short] = true
	return short
}
