// Package rules loads, validates and matches the rules file that tells
// usdt-toolexec which functions get automatic entry and exit probes.
//
// # File format
//
// A rules file is one YAML document holding a mapping with two keys:
//
//	provider: shop                        # provider of all automatic probes; default "go"
//	rules:                                # required; at least one rule
//	  - package: "example.com/shop/..."   # required: import path pattern
//	    func: "*"                         # glob on function names; default "*"
//	    exclude: ["*.String", "init"]     # globs on the same names; default none
//	    probes: [entry, exit]             # which probes to insert; default both
//	    args: true                        # pass arguments and results; default true
//	    unwind: false                     # true: exit probes fire on panics too; default false
//	    inline: probe                     # keep: leave functions the compiler inlines unprobed; default probe
//	    sites: code                       # notes: leave the functions as compiled, notes on their own code;
//	                                      # switch: leave them as compiled, with traced copies beside them; default code
//	    attributes:                       # span attributes: Go expressions; default none
//	      order.path: "r.URL.Path"
//	    context: "msg.Headers[\"traceparent\"]"  # the W3C traceparent the calls join; default none
//
// provider is the USDT provider name that bpftrace, perf and gdb show for
// every automatic probe, so it must match [A-Za-z_][A-Za-z0-9_]*.
//
// probes lists "entry", "exit" or both; it may not be empty (delete the rule
// instead). With args true, the entry probe carries the receiver and the
// parameters and the exit probe the results; with args false the probes carry
// no arguments.
//
// With unwind false, the exit probe fires at the function's returns, all
// joined into one; a function whose returns cannot all be joined (see
// usdt-toolexec's documentation) gets a deferred call instead. With unwind
// true, the exit probe is a deferred call in every function: it fires on
// every return and also while a panic or runtime.Goexit unwinds through
// the function, which costs a probed program about a quarter more bytes
// per probe and keeps the results of every such function in memory. unwind
// in a rule without exit probes is an error.
//
// With inline keep, a function that the compiler inlines when it is
// compiled as written stays as written, without probes: a probe costs the
// inliner a call, 57 of its budget of 80, and would take the inlining
// away, and with it the speed of hot code that nobody traces.
// usdt-toolexec asks the compiler which functions those are, and -v names
// each. With inline probe they are probed all the same: each keeps only
// its body and a test of its semaphore on the untraced path, so those
// that still fit the budget stay inlined, and fire their probes from
// every place they were inlined into while traced.
//
// With sites code, the probes are code spliced into the function: untraced,
// a test of the semaphore at entry and of the start time at the return;
// traced, the exit probe passes the call's elapsed time, and the probes
// can write into the in-process ring. With sites notes the function is
// left exactly as the compiler makes it, inlining included, and its
// probes are notes that point at its own instructions: the entry probe at
// its first instruction after the stack check, the exit probe at each of
// its returns (see internal/funcsites). Untraced they cost nothing; a
// traced fire is a breakpoint on one of the function's instructions
// rather than on a NOP, and the exit probe's elapsed time (arg1) is 0:
// usdt-toolexec trace times such a call from its entry event instead. The
// probes pass the values Go's register ABI keeps in one integer register
// (integers, booleans, pointers, maps, channels and funcs); strings,
// slices, interfaces, structs, floats, and values passed on the stack
// are left out (see internal/regabi). A function the compiler inlines
// fires only where a call of it was not inlined. unwind, attributes and
// context need code, and are errors with sites notes.
//
// With sites switch the function is left exactly as the compiler makes
// it too, inlining included, and the executable also holds a traced copy
// of it (usdtSwitched_F; usdtSwitched_M for a method M, on the same
// receiver), with the same signature and receiver and the probes of
// sites code.
// Nothing calls the copy: usdt-toolexec switch sends the function's
// calls to it at run time (see internal/textpatch), and until then its
// probes never fire.
// Everything sites code allows (unwind, attributes, context) applies to
// the copy. A function that cannot be copied (a generic one, one with a
// directive other than //go:noinline, //go:norace or //go:nocheckptr, one
// that calls recover or declares a type, one whose copy's name is taken)
// is probed as sites code probes it, inline included, and usdt-toolexec
// says so.
//
// attributes maps names to Go expressions over the function's receiver
// and parameters, which the entry probe passes after the arguments while
// someone traces; they are type-checked when the package is compiled, and
// one that panics shows the panic as its value. A name has a namespace,
// as OpenTelemetry's do (order.path, not path), outside those the tracer
// uses itself (usdt, args, results, code, process, thread). context is an
// expression of a W3C traceparent header, whose trace the calls join (a
// function that takes a *net/http.Request needs none: its header is
// read). Both need an entry probe.
//
// Every key is checked: an unknown key, a value of the wrong type (a quoted
// "true" is a string, not a boolean; exclude and probes want lists even for
// one element), a duplicate key or an invalid pattern is an error with its
// file:line:col and a hint. YAML anchors and aliases work; merge keys ("<<")
// do not.
//
// # Package patterns
//
// package is an import path in which an element "..." stands for any number
// of path elements, none included:
//
//	"example.com/shop"       that package only
//	"example.com/shop/..."   example.com/shop and every package below it
//	".../internal/..."       every package with an "internal" element
//	"a/.../b"                a/b, a/x/b, a/x/y/b, ...
//	"..."                    every package, the standard library included
//
// A trailing "/..." means what it means to go list. Unlike go list, "..."
// must be a whole path element ("example.com/shop..." is rejected, because
// it would also match example.com/shopping), and "..." anywhere may match
// zero elements. Empty patterns, blanks, a leading or trailing "/", empty,
// "." and ".." elements, and glob characters (* ? [ ] \) are rejected.
//
// # Function globs
//
// func and exclude match a function's name, written "Func" for a plain
// function and "Type.Method" for a method. The receiver type is written bare:
// no "*" for a pointer receiver and no type parameters, so both
// func (c *Cart) Add and func (c Cart) Add are "Cart.Add", and
// func (l *List[T]) Push is "List.Push".
//
// The syntax is path.Match's: "*" matches any run of characters, "?" one
// character, "[...]" one character of a class, and "\" escapes the next
// character. The "." between type and method is structural: a glob without
// a "." matches plain functions only, a glob with one "." matches methods
// only, each side on its own, so no wildcard ever matches across the ".".
// The one exception is "*" on its own, which matches everything:
//
//	"*"          every function and every method
//	"Func*"      plain functions whose name starts with Func, no methods
//	"Type.*"     every method of Type
//	"*.String"   the String method of any type
//	"*.*"        every method, no plain functions
//	"init"       the package's init functions
//
// A glob has at most one ".", with a non-empty side on each side of it, and
// contains no blanks, "/", "(" or ")".
//
// # Matching
//
// A rule selects a function when its package pattern matches the function's
// package, its func glob matches the name and none of its exclude globs
// does. Rules are tried in file order and the first rule that selects a
// function decides its probes. An exclude only withdraws the function from
// its own rule: a later rule whose globs match it may still select it.
//
// A rule that selects no function is usually a mistake, but not an error:
// usdt-toolexec's link step warns about it for each binary ([Rules.Unmatched]),
// from the rules each package's compile selected functions by
// ([Rules.Selected]).
//
// # Finding and caching
//
// [Locate] finds the file: an explicit flag value, else $USDT_RULES, else
// usdt.yml in the main module's root directory. [Rules].Hash is the SHA-256
// of the file's bytes; usdt-toolexec makes it part of its tool identity, the
// build cache key of every package it compiles, so that editing the rules
// rebuilds what they may change.
package rules
