// Command netuser calls two functions of package net, which imports a
// package the standard library vendors.
package main

import "net"

func main() {
	println(net.JoinHostPort(net.ParseIP("10.0.0.1").String(), "80"))
}
