// Package diag is how every input this project reads (provider files, rules
// files) reports mistakes: positioned errors with a hint on how to fix
// them, sorted and capped like the Go compiler's.
package diag

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Pos is a position in an input file. Line and Col are 1-based; 0 means
// unknown (some YAML errors come without a column).
type Pos struct {
	File      string
	Line, Col int
}

// String formats p as "file:line:col", leaving out the parts that are
// unknown, the way go/token does.
func (p Pos) String() string {
	s := p.File
	if p.Line > 0 {
		if s != "" {
			s += ":"
		}
		s += strconv.Itoa(p.Line)
		if p.Col > 0 {
			s += ":" + strconv.Itoa(p.Col)
		}
	}
	if s == "" {
		s = "-"
	}
	return s
}

// Error is one mistake. Hint, when set, tells the user how to fix it: most
// people write these files rarely and should not have to learn a grammar
// from error messages.
type Error struct {
	Pos  Pos
	Msg  string
	Hint string
}

func (e *Error) Error() string {
	s := e.Pos.String() + ": " + e.Msg
	if e.Hint != "" {
		s += "\n\thint: " + e.Hint
	}
	return s
}

// ErrorList is every mistake found in one file, in file order. Reporting
// them all at once saves an edit-build round trip per mistake.
type ErrorList []*Error

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// MaxErrors caps a list: past a handful, later errors are usually
// consequences of earlier ones and only bury them.
const MaxErrors = 10

// Finish sorts the errors by position, drops exact repeats and caps the
// list with a "too many errors" entry. It returns nil for no errors.
func (l ErrorList) Finish() ErrorList {
	if len(l) == 0 {
		return nil
	}
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Col, b.Pos.Col))
	})
	l = slices.CompactFunc(l, func(a, b *Error) bool { return *a == *b })
	if len(l) > MaxErrors {
		l = append(l[:MaxErrors:MaxErrors], &Error{Pos: l[MaxErrors].Pos, Msg: "too many errors"})
	}
	return l
}
