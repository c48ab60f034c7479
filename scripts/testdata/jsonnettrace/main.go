// Command jsonnettrace evaluates a Jsonnet file as go-jsonnet's cmd/jsonnet
// does, under Go's execution tracer (runtime/trace) when -trace names a
// file: the anchor scripts/bench-ring.sh measures the in-process ring
// against. bench-ring.sh copies it into go-jsonnet's module, which it
// builds in.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/trace"

	"github.com/google/go-jsonnet"
)

func main() {
	out := flag.String("trace", "", "write Go's execution trace to this file")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: jsonnettrace [-trace FILE] FILE.jsonnet")
		os.Exit(2)
	}
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		defer trace.Stop()
	}
	src, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	json, err := jsonnet.MakeVM().EvaluateAnonymousSnippet(flag.Arg(0), string(src))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(json)
}
