package main

// z is declared in the last file: an instrumented function that reads it
// must not make an earlier variable wait for it.
var z = readZ()

var zz = 5

func readZ() int { return zz + x }

func init() { note("init z.go") }
