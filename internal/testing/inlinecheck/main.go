// Command inlinecheck compares what the compiler inlines in a plain and in
// a probed build of the same packages, from the output of go build
// -gcflags=PATTERN=-m=2 of each, and lists every function and call site
// the plain build inlines and the probed one does not. It exits 1 when
// there is any.
//
//	go run ./internal/testing/inlinecheck plain.txt probed.txt
package main

import (
	"fmt"
	"os"

	"github.com/go-usdt/usdt/internal/inlining"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: inlinecheck plain.txt probed.txt (each the output of go build -gcflags=PATTERN=-m=2)")
		os.Exit(2)
	}
	plain, probed := read(os.Args[1]), read(os.Args[2])
	lost := inlining.Lost(plain, probed)
	for _, l := range lost {
		fmt.Println(l)
	}
	fmt.Printf("inlinable functions: plain %d, probed %d; inlined calls: plain %d, probed %d; lost: %d\n",
		plain.Inlinable(), probed.Inlinable(), plain.Inlined(), probed.Inlined(), len(lost))
	if len(lost) > 0 {
		os.Exit(1)
	}
}

func read(path string) inlining.Build {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	b, err := inlining.Read(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		os.Exit(2)
	}
	return b
}
