// Command cgoshop calls the cgo package once.
package main

import (
	"fmt"

	"example.com/auto/cprice"
)

func main() {
	fmt.Printf("scale=%d\n", cprice.Scale(-2000, 15))
	fmt.Printf("label=%s\n", cprice.Label(7, "EUR"))
}
