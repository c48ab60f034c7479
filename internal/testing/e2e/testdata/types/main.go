// Command types fires one probe of each mapped type with fixed values, for
// the end-to-end tests. Modes:
//
//	types fire      fire every probe every millisecond for a minute
//	types gate      fire types:ints and print "enabled=BOOL" at every change
//	types selfnotes print how many stapsdt notes its own executable has
//	types once      fire every probe once
//	types lens      fire types:strs with strings of 0, 1, 255 and 300
//	                bytes, then of 256 and 257 (see lens)
package main

//go:generate usdtgen types.d

import (
	"debug/elf"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unsafe"
)

var target int64 = 42

func fire() {
	TypesInts(math.MinInt8, math.MaxUint8, math.MinInt16, math.MaxUint16, math.MinInt32, math.MaxUint32)
	TypesWide(math.MinInt64, math.MaxUint64, 0xdeadbeef, true, false, unsafe.Pointer(&target))
	TypesStrs("", "héllo, 世界", strings.Repeat("0123456789", 30), "plain")
	TypesChars(-5, -6, 250, -7, 1<<40, 1<<63)
	TypesTwelve(0, -1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11)
	TypesTick()
}

func main() {
	mode := "fire"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	fmt.Printf("ptr=%#x\n", uintptr(unsafe.Pointer(&target)))
	switch mode {
	case "fire":
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			fire()
			time.Sleep(time.Millisecond)
		}
	case "gate":
		last := TypesIntsEnabled()
		fmt.Printf("enabled=%v\n", last)
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			TypesInts(1, 2, 3, 4, 5, 6)
			if now := TypesIntsEnabled(); now != last {
				last = now
				fmt.Printf("enabled=%v\n", now)
			}
			time.Sleep(time.Millisecond)
		}
	case "once":
		fire()
	case "lens":
		TypesStrs(lens(0), lens(1), lens(255), lens(300))
		TypesStrs(lens(256), lens(257), "", "")
	case "selfnotes":
		fmt.Printf("notes=%d\n", countNotes())
	}
}

// lens returns the first n bytes of the alphabet repeated, so that a cut
// copy shows where it was cut.
func lens(n int) string {
	return strings.Repeat("abcdefghijklmnopqrstuvwxyz", 12)[:n]
}

func countNotes() int {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	n := 0
	for _, s := range f.Sections {
		if s.Name != ".note.stapsdt" {
			continue
		}
		data, err := s.Data()
		if err != nil {
			panic(err)
		}
		n += strings.Count(string(data), "stapsdt\x00")
	}
	return n
}
