package rules_test

import (
	"fmt"

	"github.com/go-usdt/usdt/rules"
)

func Example() {
	rs, err := rules.Parse("usdt.yml", []byte(`
provider: shop
rules:
  - package: "example.com/shop/..."
    exclude: ["*.String"]
  - package: "example.com/vendor/lib"
    func: "Parse*"
    probes: [exit]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, fn := range []string{"NewCart", "Cart.Add", "Cart.String"} {
		if r, ok := rs.Match("example.com/shop/cart", fn); ok {
			fmt.Printf("%s: rule %d, entry=%v exit=%v\n", fn, r.Index, r.Entry, r.Exit)
		} else {
			fmt.Printf("%s: no probes\n", fn)
		}
	}
	for _, r := range rs.Unused() {
		fmt.Printf("unused: %s\n", r)
	}
	// Output:
	// NewCart: rule 0, entry=true exit=true
	// Cart.Add: rule 0, entry=true exit=true
	// Cart.String: no probes
	// unused: rule 2 at usdt.yml:6:5 (package "example.com/vendor/lib", func "Parse*")
}

func ExampleParse_error() {
	_, err := rules.Parse("usdt.yml", []byte(`
rules:
  - package: "example.com/shop/..."
    fucn: "Handle*"
`))
	fmt.Println(err)
	// Output:
	// usdt.yml:4:5: unknown key "fucn"
	// 	hint: did you mean "func"? valid keys are: package, func, exclude, probes, args, unwind, inline, sites, attributes, context
}
