package rules

import (
	"github.com/go-usdt/usdt/internal/diag"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pos is a position in a rules file; Col counts characters, as YAML does,
// and is 0 when only the line is known: yaml.v3 reports no column for its
// syntax errors, and for some (an indentation mistake, an unclosed list)
// the line it reports is where the enclosing block starts. Error is one
// problem found in a rules file; ErrorList is every problem Parse found,
// in file order, ending in "too many errors" past ten.
type (
	Pos       = diag.Pos
	Error     = diag.Error
	ErrorList = diag.ErrorList
)

// yamlLineRE splits yaml.v3's error text, "yaml: line N: problem", where the
// line part is missing when yaml.v3 computed line 0.
var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlParserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports. For those it prints the 0-based line of the mark, so the
// 1-based line is one more; for scanner problems it already adds one.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlError turns a yaml.v3 error into a positioned Error. yaml.v3 exposes
// neither the column nor, for some problems, the line, so this recovers what
// it can from the text: yaml.v3's message is all we get.
func yamlError(file string, data []byte, err error) *Error {
	text := err.Error()
	m := yamlLineRE.FindStringSubmatch(text)
	if m == nil {
		// Not the usual shape: keep yaml's words, put it at the start.
		return &Error{Pos: Pos{File: file, Line: 1}, Msg: "invalid YAML: " + text}
	}
	problem := m[2]
	pos := Pos{File: file, Line: 1}
	if m[1] != "" {
		n, _ := strconv.Atoi(m[1])
		if yamlParserProblems[problem] {
			n++
		}
		pos.Line = n
	}
	e := &Error{Pos: pos, Msg: "invalid YAML: " + problem}

	switch {
	case strings.HasPrefix(problem, "unknown anchor '"):
		// yaml.v3 gives no line here; find the alias in the text.
		name := strings.TrimSuffix(strings.TrimPrefix(problem, "unknown anchor '"), "' referenced")
		if off := findAlias(data, name); off >= 0 {
			e.Pos = offsetPos(file, data, off)
		}
		e.Hint = starHint
	case problem == "did not find expected alphabetic or numeric character":
		// The usual cause is an unquoted glob such as *.String, which YAML
		// reads as an alias.
		e.Hint = starHint
	case problem == "control characters are not allowed" || strings.Contains(problem, "UTF-8") ||
		strings.Contains(problem, "UTF-16") || problem == "invalid Unicode character":
		// Reader errors carry no position at all; find the bad byte.
		if off := badCharOffset(data); off >= 0 {
			e.Pos = offsetPos(file, data, off)
		}
		e.Hint = "a rules file must be UTF-8 text without control characters"
	case strings.Contains(problem, "tab character") || problem == "found character that cannot start any token":
		if col := tabCol(data, e.Pos.Line); col > 0 {
			e.Pos.Col = col
			e.Hint = "indent with spaces: YAML does not allow tabs in indentation"
		} else {
			e.Hint = "quote values that start with a special character such as * & ! % @ or `"
		}
	case problem == "mapping values are not allowed in this context":
		e.Hint = `check the indentation of this line, and quote plain values that contain ": "`
	case openQuote(data, e.Pos.Line):
		e.Hint = "close the quoted string on this line"
	case problem == "did not find expected key" || problem == "did not find expected '-' indicator" ||
		problem == "block sequence entries are not allowed in this context":
		e.Hint = `check the indentation: the keys of one rule must line up, and each rule starts with "- "`
	case problem == "did not find expected ',' or ']'":
		e.Hint = "close the [ list with ]"
	case problem == "did not find expected ',' or '}'":
		e.Hint = "close the { mapping with }"
	case problem == "found unexpected end of stream":
		e.Hint = "close the quoted string"
	}
	return e
}

const starHint = `YAML reads a value starting with * as an alias: quote globs, e.g. func: "*.String"`

// findAlias returns the offset of the first "*name" not followed by another
// anchor-name character, or -1.
func findAlias(data []byte, name string) int {
	needle := "*" + name
	s := string(data)
	base := 0
	for {
		i := strings.Index(s[base:], needle)
		if i < 0 {
			return -1
		}
		end := base + i + len(needle)
		if end == len(s) || strings.ContainsRune(" \t\r\n,]}", rune(s[end])) {
			return base + i
		}
		base = end
	}
}

// badCharOffset returns the offset of the first byte sequence YAML refuses:
// invalid UTF-8, or a control character other than tab, LF and CR.
func badCharOffset(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || (r >= 0x7f && r <= 0x9f && r != 0x85) ||
			(r >= 0xd800 && r <= 0xdfff) || r == 0xfffe || r == 0xffff {
			return i
		}
		i += size
	}
	return -1
}

// offsetPos converts a byte offset to a line and a character column.
func offsetPos(file string, data []byte, off int) Pos {
	off = min(off, len(data))
	line := 1 + strings.Count(string(data[:off]), "\n")
	start := strings.LastIndexByte(string(data[:off]), '\n') + 1
	return Pos{File: file, Line: line, Col: 1 + utf8.RuneCount(data[start:off])}
}

// openQuote reports whether the 1-based line has an unclosed double-quoted
// string, which makes YAML report a confusing problem further on. Single
// quotes are left alone: apostrophes in comments would fool the count.
func openQuote(data []byte, line int) bool {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return false
	}
	quotes := 0
	l := lines[line-1]
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case '\\':
			i++ // an escaped character, quote or not
		case '"':
			quotes++
		}
	}
	return quotes%2 == 1
}

// tabCol returns the column of the first tab in the leading blanks of the
// 1-based line, or 0.
func tabCol(data []byte, line int) int {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return 0
	}
	for i, r := range []rune(lines[line-1]) {
		switch r {
		case '\t':
			return i + 1
		case ' ':
		default:
			// A tab after a "- " or after a key is indentation too, but
			// only within the blanks YAML reads as such.
			if r != '-' {
				return 0
			}
		}
	}
	return 0
}
