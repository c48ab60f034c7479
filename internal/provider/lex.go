package provider

import "fmt"

type tokKind int

const (
	tEOF tokKind = iota
	// tWord is anything made of identifier characters, plus the characters
	// a mistyped name tends to contain ('-', '.', '$', non-ASCII letters),
	// so that "order-placed" reaches the parser as one bad name rather than
	// as three puzzling tokens.
	tWord
	tPunct
	tString
	// tIllegal is a byte the language has no use for. The lexer does not
	// report it: inside a #define body it merely makes the macro unusable
	// as a type, so only the parser knows whether it is an error.
	tIllegal
	// tDefine and tUndef are whole directive lines; body holds the tokens
	// after the directive name.
	tDefine
	tUndef
)

type token struct {
	kind tokKind
	text string
	pos  Pos
	body []token
	// adjacent reports that no white space or comment separates this token
	// from the previous one, which is how C tells a function-like macro
	// "#define F(x)" from "#define F (x)".
	adjacent bool
}

func (t token) is(text string) bool {
	return (t.kind == tPunct || t.kind == tWord) && t.text == text
}

// end is the position just past the token; tokens never span lines.
func (t token) end() Pos {
	p := t.pos
	p.Col += len(t.text)
	return p
}

// describe names the token for "expected X, found Y" messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tString:
		return "string literal " + t.text
	case tDefine:
		return "#define"
	case tUndef:
		return "#undef"
	}
	return fmt.Sprintf("%q", t.text)
}

type lexer struct {
	file      string
	src       []byte
	off       int
	line      int
	lineStart int
	// atLineStart is true while only white space and comments precede off
	// on its line: the only place where '#' starts a directive.
	atLineStart bool
	// sawGap is true when white space or a comment was skipped since the
	// last token.
	sawGap bool
	errs   []*Error
	// unterminated is set when a comment runs to the end of the file; the
	// parser then keeps quiet about the end of file it reaches too early.
	unterminated bool
	// sawInclude lets an unknown-type hint point out that #include is not
	// followed.
	sawInclude bool
}

func newLexer(file string, src []byte) *lexer {
	l := &lexer{file: file, src: src, line: 1, atLineStart: true}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		l.off = 3
		l.lineStart = 3
	}
	return l
}

func (l *lexer) pos() Pos {
	return Pos{File: l.file, Line: l.line, Col: l.off - l.lineStart + 1}
}

func (l *lexer) newline() {
	l.off++
	l.line++
	l.lineStart = l.off
}

func (l *lexer) run() []token {
	var toks []token
	for {
		l.skip(false)
		if l.off >= len(l.src) {
			toks = append(toks, token{kind: tEOF, pos: l.pos()})
			return toks
		}
		if l.src[l.off] == '#' && l.atLineStart {
			if t, ok := l.directive(); ok {
				toks = append(toks, t)
			}
			continue
		}
		toks = append(toks, l.scan())
		l.atLineStart = false
	}
}

// skip moves past white space and comments. In a directive it stops before
// the first newline that ends the directive and reports true.
func (l *lexer) skip(directive bool) (eol bool) {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			l.off++
		case c == '\n':
			if directive {
				return true
			}
			l.newline()
			l.atLineStart = true
		case c == '\\' && directive && l.continuation():
			// A backslash-newline continues the directive: it is a space.
		case c == '/' && l.peek(1) == '*':
			l.blockComment()
		case c == '/' && l.peek(1) == '/':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.off++
			}
		default:
			return false
		}
		l.sawGap = true
	}
	return false
}

// continuation consumes a backslash followed by a newline, if that is what
// is at off.
func (l *lexer) continuation() bool {
	n := 1
	if l.peek(n) == '\r' {
		n++
	}
	if l.peek(n) != '\n' {
		return false
	}
	l.off += n
	l.newline()
	return true
}

func (l *lexer) peek(n int) byte {
	if l.off+n < len(l.src) {
		return l.src[l.off+n]
	}
	return 0
}

func (l *lexer) blockComment() {
	start := l.pos()
	l.off += 2
	for l.off < len(l.src) {
		switch {
		case l.src[l.off] == '*' && l.peek(1) == '/':
			l.off += 2
			return
		case l.src[l.off] == '\n':
			l.newline()
		default:
			l.off++
		}
	}
	l.unterminated = true
	l.errs = append(l.errs, &Error{
		Pos:  start,
		Msg:  "unterminated comment",
		Hint: "this /* is never closed by */",
	})
}

// directive handles a line starting with '#'. Only #define and #undef
// produce a token; everything else (#pragma D attributes, #include, #if) is
// dropped, because a provider file's meaning never depends on it in
// practice.
func (l *lexer) directive() (token, bool) {
	t := token{pos: l.pos()}
	l.off++
	for l.off < len(l.src) && (l.src[l.off] == ' ' || l.src[l.off] == '\t') {
		l.off++
	}
	start := l.off
	for l.off < len(l.src) && isWordByte(l.src[l.off]) {
		l.off++
	}
	name := string(l.src[start:l.off])
	switch name {
	case "define":
		t.kind = tDefine
	case "undef":
		t.kind = tUndef
	default:
		if name == "include" {
			l.sawInclude = true
		}
		l.skipLine()
		return token{}, false
	}
	t.text = "#" + name
	for {
		l.sawGap = false
		if l.skip(true) || l.off >= len(l.src) {
			break
		}
		b := l.scan()
		b.adjacent = !l.sawGap
		t.body = append(t.body, b)
	}
	return t, true
}

// skipLine drops the rest of an ignored directive, honouring what would
// otherwise hide or fake its end: comments, quotes and backslash-newlines.
func (l *lexer) skipLine() {
	for l.off < len(l.src) {
		switch c := l.src[l.off]; {
		case c == '\n':
			return
		case c == '\\' && l.continuation():
		case c == '/' && l.peek(1) == '*':
			l.blockComment()
		case c == '/' && l.peek(1) == '/':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.off++
			}
		case c == '"' || c == '\'':
			l.scan()
		default:
			l.off++
		}
	}
}

// scan reads one token at off, which is not white space.
func (l *lexer) scan() token {
	t := token{pos: l.pos()}
	start := l.off
	c := l.src[l.off]
	switch {
	case isWordByte(c):
		for l.off < len(l.src) && isWordByte(l.src[l.off]) {
			l.off++
		}
		t.kind = tWord
	case c == '"' || c == '\'':
		// A quoted string only ever appears in a #define body or by
		// mistake; reading it whole keeps a "//" inside it from
		// swallowing the rest of the line.
		l.off++
		for l.off < len(l.src) && l.src[l.off] != c && l.src[l.off] != '\n' {
			if l.src[l.off] == '\\' && l.off+1 < len(l.src) && l.src[l.off+1] != '\n' {
				l.off++
			}
			l.off++
		}
		if l.off < len(l.src) && l.src[l.off] == c {
			l.off++
		}
		t.kind = tString
	case isPunct(c):
		l.off++
		t.kind = tPunct
	default:
		l.off++
		t.kind = tIllegal
	}
	t.text = string(l.src[start:l.off])
	l.sawGap = false
	return t
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '$' || c == '-' || c == '.' || c >= 0x80
}

func isPunct(c byte) bool {
	switch c {
	case '{', '}', '(', ')', ';', ',', '*', ':', '[', ']', '=':
		return true
	}
	return false
}
