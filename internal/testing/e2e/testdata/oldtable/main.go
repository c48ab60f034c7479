// Command oldtable fires a probe whose table is in the format usdtgen wrote
// before tables carried argument names, for the end-to-end tests of
// binaries built then.
package main

import "fmt"

func main() {
	OldHit(7, "seven")
	fmt.Println("fired")
}
