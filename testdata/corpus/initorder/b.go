package main

var fromB = note("fromB")

var d = twice(e)

var e = note("e")

func twice(n int) int { note("twice"); return 2 * n }

func init() { note("init b.go") }
