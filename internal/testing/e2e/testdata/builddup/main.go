// Command dup links two packages named util, example.com/a/util and
// example.com/b/util.
package main

import (
	autil "example.com/a/util"
	butil "example.com/b/util"
	"example.com/c/other"
)

func main() {
	println(autil.Join("x", "y"), butil.Join("x", "y"), autil.Sep("-").Between("p", "q"), butil.Sep("+").Between("p", "q"), other.Twice(21))
}
