// Command app uses a package of another module, example.com/lib, which the
// vendoring test vendors and the workspace test puts in the same go.work.
package main

import "example.com/lib/calc"

func main() {
	println("sum", calc.Sum(1, 2, 3), "scaled", calc.Scale{By: 3}.Apply(5))
}
