// Command one links only one of the two util packages: nothing to
// disambiguate.
package main

import "example.com/a/util"

func main() {
	println(util.Join("x", "y"))
}
