//go:build usdt_e2e_pgo

package main

import (
	"os"
	"runtime/pprof"
	"time"

	"example.com/build/shop"
)

// Built with -tags usdt_e2e_pgo, the program writes a CPU profile of a
// second of its hot loop to the file named by its argument and exits: the
// default.pgo of the -pgo=auto build test.
func init() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	var sink uint64
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		sink += shop.Checksum(100000)
	}
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		panic(err)
	}
	println("profiled", sink != 0)
	os.Exit(0)
}
