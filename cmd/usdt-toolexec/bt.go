package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/go-usdt/usdt/internal/autoprobe"
)

// bt prints a starter bpftrace script for a binary's automatic probes: a
// latency histogram per function. Entry and exit pair up on arg0, the
// goroutine id, because a goroutine may resume on another thread between
// the two, which makes the usual @start[tid] pairing wrong in Go.
func bt(path string, w io.Writer) error {
	notes, err := readNotes(path)
	if err != nil {
		return err
	}
	type fn struct{ provider, entry, exit, label string }
	byFunc := map[string]*fn{}
	for _, n := range notes {
		kind, pkg, name, ok := autoprobe.Split(n.Name)
		if !ok || kind != "entry" && kind != "exit" {
			continue
		}
		key := n.Provider + ":" + pkg + "__" + name
		e := byFunc[key]
		if e == nil {
			e = &fn{provider: n.Provider, label: autoprobe.Label(pkg, name)}
			byFunc[key] = e
		}
		if kind == "entry" {
			e.entry = n.Name
		} else {
			e.exit = n.Name
		}
	}
	var keys []string
	for k, e := range byFunc {
		if e.entry != "" && e.exit != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("%s: no function has both entry__ and exit__ probes (build it with usdt-toolexec and a rules file)", path)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "// Latency of every instrumented function in %s, in microseconds.\n// usage: bpftrace THIS_FILE -c '%s'   (or -p PID)\n", path, path)
	fmt.Fprintf(w, "// Entry and exit pair on arg0, the goroutine id; a recursive call\n// overwrites its caller's start time.\n")
	for i, k := range keys {
		e := byFunc[k]
		fmt.Fprintf(w, "\nusdt:%s:%s:%s\n{\n\t@start[arg0, %d] = nsecs;\n}\n", path, e.provider, e.entry, i)
		fmt.Fprintf(w, "\nusdt:%s:%s:%s\n/@start[arg0, %d]/\n{\n\t@us[%q] = hist((nsecs - @start[arg0, %d]) / 1000);\n\tdelete(@start[arg0, %d]);\n}\n", path, e.provider, e.exit, i, e.label, i, i)
	}
	fmt.Fprintf(w, "\nEND\n{\n\tclear(@start);\n}\n")
	return nil
}
