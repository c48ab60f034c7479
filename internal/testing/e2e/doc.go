// Package e2e holds the end-to-end tests: they build real programs with the
// project's commands on every build route, and check the results with the
// real consumers (readelf, bpftrace, bcc, perf, gdb).
package e2e
