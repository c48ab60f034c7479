// Command wrapperid prints the go build flag that gives usdt-toolexec the
// identity this repository's tests build it with (package wrapperid):
// the benchmark scripts build it so too, so that a change to the tracer
// alone leaves their instrumented builds cached.
//
//	go build "$(go run ./internal/testing/wrapperid/cmd/wrapperid)" -o DIR/ ./cmd/usdt-toolexec
//
// It runs in the module's root.
package main

import (
	"fmt"
	"os"

	"github.com/go-usdt/usdt/internal/testing/wrapperid"
)

func main() {
	flag, err := wrapperid.LDFlag(".", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrapperid:", err)
		os.Exit(1)
	}
	fmt.Println(flag)
}
