package provider

import (
	"fmt"
	gotoken "go/token"
	"regexp"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
)

// alias is a name given to a type by typedef or #define.
type alias struct {
	pos  Pos
	how  string // "typedef" or "#define"
	t    ctype
	text string // the type as written, a #define's whole body
	// bad is why a #define body is not a type. Such a macro is only an
	// error where it is used as one: dtrace runs the C preprocessor over
	// the file, so "#define VERSION 3" is legal there until it is misused.
	bad string
}

func (a *alias) sameAs(b *alias) bool {
	if a.bad != "" || b.bad != "" {
		return a.how == b.how && a.text == b.text
	}
	return a.t == b.t
}

type parser struct {
	file        string
	toks        []token
	i           int
	tok         token
	errs        []*Error
	eofIsBroken bool
	sawInclude  bool
	aliases     map[string]*alias
	provs       []Provider
	provPos     map[string]Pos
	sawProvider bool
}

func newParser(file string, toks []token, lx *lexer) *parser {
	p := &parser{
		file:        file,
		toks:        toks,
		i:           -1,
		errs:        lx.errs,
		eofIsBroken: lx.unterminated,
		sawInclude:  lx.sawInclude,
		aliases:     map[string]*alias{},
		provPos:     map[string]Pos{},
	}
	p.next()
	return p
}

func (p *parser) errorf(pos Pos, hint, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: pos, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// unexpected reports that tok is not what the grammar wants here. At an end
// of file caused by an unterminated comment it stays quiet: the comment is
// the one mistake to fix.
func (p *parser) unexpected(tok token, hint, expected string) {
	if tok.kind == tEOF && p.eofIsBroken {
		return
	}
	switch tok.kind {
	case tIllegal:
		if tok.text == "#" {
			hint = "a preprocessor directive must be the first thing on its line"
		} else if hint == "" {
			hint = "a provider file holds only declarations, comments and # directives"
		}
		p.errorf(tok.pos, hint, "unexpected character %q, expected %s", tok.text, expected)
	default:
		p.errorf(tok.pos, hint, "expected %s, found %s", expected, tok.describe())
	}
}

func (p *parser) errorList() ErrorList {
	return ErrorList(p.errs).Finish()
}

// next moves to the next token, acting on the #define and #undef lines on
// the way: macros are expanded where they are used, so they are simply in
// force from their line on, wherever that line is.
func (p *parser) next() {
	for p.i < len(p.toks)-1 {
		p.i++
		p.tok = p.toks[p.i]
		switch p.tok.kind {
		case tDefine:
			p.define(p.tok)
		case tUndef:
			if len(p.tok.body) > 0 {
				delete(p.aliases, p.tok.body[0].text)
			}
		default:
			return
		}
	}
}

// prevEnd is where the token before the current one ends: a missing ";"
// is reported there, on the line that lacks it, rather than on the next
// declaration.
func (p *parser) prevEnd() Pos {
	for i := p.i - 1; i >= 0; i-- {
		if t := p.toks[i]; t.kind != tDefine && t.kind != tUndef {
			return t.end()
		}
	}
	return p.tok.pos
}

// peek returns the token after the current one.
func (p *parser) peek() token {
	for _, t := range p.toks[p.i+1:] {
		if t.kind != tDefine && t.kind != tUndef {
			return t
		}
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) parseFile() []Provider {
	for p.tok.kind != tEOF {
		switch {
		case p.tok.kind == tWord && p.tok.text == "provider":
			p.parseProvider()
		case p.tok.kind == tWord && p.tok.text == "typedef":
			p.parseTypedef()
		case p.tok.kind == tWord && tagKeywords[p.tok.text]:
			p.parseTagDecl()
		case p.tok.is(";"):
			p.next()
		default:
			hint := "a provider file holds provider blocks, typedefs and #defines"
			switch {
			case p.tok.is("}"):
				hint = "this } closes nothing; is there one too many?"
			case p.tok.is("probe"):
				hint = "probes are declared inside a provider block: provider NAME { probe NAME(TYPE, ...); };"
			}
			p.unexpected(p.tok, hint, `"provider", "typedef" or "#define"`)
			if !p.tok.is("{") {
				p.next() // syncDecl must see a "{" to skip its block
			}
			p.syncDecl()
		}
	}
	if !p.sawProvider && len(p.errs) == 0 {
		p.errorf(Pos{File: p.file, Line: 1, Col: 1},
			"a provider file declares its probes like this: provider myapp { probe request__start(const char *path, int64_t size); };",
			"no provider in file")
	}
	return p.provs
}

// syncTop skips to the next provider or typedef: after a provider header
// goes wrong, its probes would otherwise each be reported as stray.
func (p *parser) syncTop() {
	p.next()
	for p.tok.kind != tEOF && !(p.tok.kind == tWord && (p.tok.text == "provider" || p.tok.text == "typedef")) {
		p.next()
	}
}

// syncProbe skips the rest of a broken probe declaration.
func (p *parser) syncProbe() {
	for {
		switch {
		case p.tok.kind == tEOF, p.tok.is("}"), p.tok.is("probe"), p.tok.is("provider"):
			return
		case p.tok.is(";"):
			p.next()
			return
		}
		p.next()
	}
}

func (p *parser) parseProvider() {
	p.sawProvider = true
	p.next()
	nameTok := p.tok
	if nameTok.kind != tWord {
		p.unexpected(nameTok, "write provider NAME { ... };", "provider name")
		p.syncTop()
		return
	}
	ok := p.checkName(nameTok, "provider")
	p.next()
	if !p.tok.is("{") {
		p.unexpected(p.tok, "a provider's probes go in braces: provider NAME { probe NAME(TYPE, ...); };",
			fmt.Sprintf(`"{" after provider %s`, nameTok.text))
		p.syncTop()
		return
	}
	open := p.tok
	p.next()
	prov := Provider{Name: nameTok.text, Pos: nameTok.pos}
	seen := map[string]Pos{}
	for !p.tok.is("}") {
		switch {
		case p.tok.kind == tEOF:
			if !p.eofIsBroken {
				p.errorf(open.pos, "the { opened here is never closed; end the block with };",
					"unterminated provider block %s: expected \"}\", found end of file", nameTok.text)
			}
			return
		case p.tok.is("provider"):
			p.unexpected(p.tok,
				fmt.Sprintf("the block of provider %s opened at %d:%d is not closed; end it with };", nameTok.text, open.pos.Line, open.pos.Col),
				`"probe" or "}"`)
			return
		case p.tok.is("probe"):
			if pr, good := p.parseProbe(prov.Name, seen); good {
				prov.Probes = append(prov.Probes, pr)
			} else {
				ok = false
			}
		case p.tok.is(";"):
			p.next()
		default:
			p.unexpected(p.tok, "declare each probe as: probe NAME(TYPE, ...);",
				fmt.Sprintf(`"probe" or "}" in provider %s`, nameTok.text))
			p.next()
			p.syncProbe()
		}
	}
	p.next()
	if p.tok.is(";") {
		p.next()
	}
	if first, dup := p.provPos[prov.Name]; dup {
		p.errorf(nameTok.pos,
			fmt.Sprintf("provider %s is first declared at %d:%d; declare all its probes in that one block", prov.Name, first.Line, first.Col),
			"duplicate provider %s", prov.Name)
		return
	}
	p.provPos[prov.Name] = nameTok.pos
	if ok {
		p.provs = append(p.provs, prov)
	}
}

// checkName reports a provider or probe name that no consumer accepts.
func (p *parser) checkName(t token, what string) bool {
	if probe.ValidName(t.text) {
		return true
	}
	hint := fmt.Sprintf("%s names must match [A-Za-z_][A-Za-z0-9_]*", what)
	fixed := strings.NewReplacer("-", "__", ".", "_").Replace(t.text)
	switch {
	case !probe.ValidName(fixed):
	case strings.Contains(t.text, "-"):
		hint = fmt.Sprintf("write %s: dtrace would show __ as -, but this tool keeps the name as is in the note, so tools list it as %s", fixed, fixed)
	default:
		hint = fmt.Sprintf("%s, e.g. %s", hint, fixed)
	}
	p.errorf(t.pos, hint, "invalid %s name %q", what, t.text)
	return false
}

var argNRE = regexp.MustCompile(`^arg[0-9]+$`)

func (p *parser) parseProbe(provider string, seen map[string]Pos) (Probe, bool) {
	p.next()
	nameTok := p.tok
	if nameTok.kind != tWord {
		p.unexpected(nameTok, "write probe NAME(TYPE, ...);", "probe name")
		p.syncProbe()
		return Probe{}, false
	}
	ok := p.checkName(nameTok, "probe")
	p.next()
	if !p.tok.is("(") {
		hint := fmt.Sprintf("write probe %s(TYPE [NAME], ...);", nameTok.text)
		if p.tok.is(";") {
			hint = fmt.Sprintf("a probe without arguments is written probe %s();", nameTok.text)
		}
		p.unexpected(p.tok, hint, fmt.Sprintf(`"(" after probe %s`, nameTok.text))
		p.syncProbe()
		return Probe{}, false
	}
	p.next()
	params, good := p.parseParams(nameTok.text)
	if !good {
		p.syncProbe()
		return Probe{}, false
	}
	if p.tok.is(":") {
		// The translated argument list describes what D scripts see;
		// the note carries what the program passes, the first list.
		p.next()
		if !p.tok.is("(") {
			p.unexpected(p.tok, "the translated form is probe NAME(native types) : (translated types);", `"(" after ":"`)
			p.syncProbe()
			return Probe{}, false
		}
		if !p.skipParens() {
			return Probe{}, false
		}
	}
	if !p.tok.is(";") {
		if p.tok.kind == tEOF && p.eofIsBroken {
			return Probe{}, false
		}
		p.errorf(p.prevEnd(), "end each probe declaration with ;",
			"missing \";\" after probe %s, found %s", nameTok.text, p.tok.describe())
		p.syncProbe()
		return Probe{}, false
	}
	p.next()

	if first, dup := seen[nameTok.text]; dup {
		p.errorf(nameTok.pos,
			fmt.Sprintf("probe %s is first declared at %d:%d; probe names must be unique within provider %s", nameTok.text, first.Line, first.Col, provider),
			"duplicate probe %s in provider %s", nameTok.text, provider)
		return Probe{}, false
	}
	seen[nameTok.text] = nameTok.pos
	if len(params) > probe.MaxArgs {
		p.errorf(params[probe.MaxArgs].pos,
			fmt.Sprintf("a stapsdt note holds at most %d arguments and bpftrace reads arg0-arg5 on x86_64: pack the rest into a struct and pass a pointer to it, or split the probe", probe.MaxArgs),
			"probe %s has %d arguments, more than %d", nameTok.text, len(params), probe.MaxArgs)
		return Probe{}, false
	}

	pr := Probe{Probe: probe.Probe{Provider: provider, Name: nameTok.text}, Pos: nameTok.pos}
	names := map[string]Pos{}
	for i, a := range params {
		if !a.ok {
			ok = false
			continue
		}
		name := a.name.text
		if name != "" {
			if first, dup := names[name]; dup {
				p.errorf(a.name.pos, fmt.Sprintf("the first %s is at %d:%d", name, first.Line, first.Col),
					"duplicate parameter name %s in probe %s", name, nameTok.text)
				ok = false
			}
			names[name] = a.name.pos
		}
		// Generated Go code uses these names, so anything Go would not
		// accept, and an argN that would clash with a generated one,
		// falls back to the argument's position.
		if !gotoken.IsIdentifier(name) || name == "_" || (argNRE.MatchString(name) && name != fmt.Sprintf("arg%d", i)) {
			name = fmt.Sprintf("arg%d", i)
		}
		pr.Args = append(pr.Args, probe.Arg{Name: name, Type: a.kind.GoType(), Kind: a.kind})
		pr.ArgTypes = append(pr.ArgTypes, a.text)
	}
	return pr, ok
}

// param is one parsed probe parameter; ok is false when its type was
// reported as unusable.
type param struct {
	pos  Pos
	text string
	name token
	kind probe.Kind
	ok   bool
}

// parseParams parses a parameter list after its "(" up to and including its
// ")". It reports false after a syntax error, which it has reported.
func (p *parser) parseParams(probeName string) ([]param, bool) {
	if p.tok.is(")") {
		p.next()
		return nil, true
	}
	if p.tok.is("void") && p.peek().is(")") {
		p.next()
		p.next()
		return nil, true
	}
	var params []param
	for {
		spec, good := p.parseTypeSpec()
		if !good {
			return nil, false
		}
		a := param{pos: spec.pos, text: spec.text()}
		if p.tok.kind == tWord && !reservedName(p.tok.text) {
			a.name = p.tok
			p.next()
		}
		if p.tok.is("[") {
			hint := "pass a pointer instead"
			if a.name.text != "" {
				hint = fmt.Sprintf("pass a pointer instead: %s *%s", a.text, a.name.text)
			}
			p.errorf(p.tok.pos, hint, "array parameters are not supported")
			return nil, false
		}
		if t, err := p.resolve(spec); err != nil {
			p.errs = append(p.errs, err)
		} else if k, kerr := t.kind(); kerr != nil {
			p.errorf(spec.baseTok.pos, kerr.hint, "%s", kerr.msg)
		} else {
			a.kind, a.ok = k, true
		}
		params = append(params, a)
		switch {
		case p.tok.is(")"):
			p.next()
			return params, true
		case p.tok.is(","):
			p.next()
		default:
			hint := "parameters are written TYPE [NAME] and separated by commas"
			if p.tok.kind == tWord && a.name.text != "" {
				hint = fmt.Sprintf("%s is taken as the name of the parameter; is a comma missing before %s?", a.name.text, p.tok.text)
			}
			p.unexpected(p.tok, hint, fmt.Sprintf(`"," or ")" in the parameters of probe %s`, probeName))
			return nil, false
		}
	}
}

// skipParens skips a balanced parenthesised list, the current token being
// its "(".
func (p *parser) skipParens() bool {
	open := p.tok
	depth := 0
	for {
		switch {
		case p.tok.kind == tEOF:
			if !p.eofIsBroken {
				p.errorf(open.pos, "close the list opened here with )", "unterminated argument list: expected \")\", found end of file")
			}
			return false
		case p.tok.is("("):
			depth++
		case p.tok.is(")"):
			depth--
		}
		p.next()
		if depth == 0 {
			return true
		}
	}
}

// typeSpec is a C type as parsed, before aliases are resolved.
type typeSpec struct {
	pos     Pos
	words   []string // as written, for ArgTypes
	baseTok token    // the token that decides the base: a name, a tag keyword, the first keyword
	kw      keywordSpec
	named   string // a type name other than a keyword
	tag     string // "struct foo"
	ptr     int
	nbase   int // how many words precede the first '*'
}

func (s *typeSpec) text() string {
	var b strings.Builder
	for i, w := range s.words {
		if i > 0 && !(w == "*" && s.words[i-1] == "*") {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// parseTypeSpec parses the type part of a declaration: qualifiers, base
// type and '*'s. It stops at the first token that cannot belong to the
// type, usually the declared name.
func (p *parser) parseTypeSpec() (*typeSpec, bool) {
	s := &typeSpec{pos: p.tok.pos}
	haveBase := func() bool { return s.named != "" || s.tag != "" || s.baseTok.kind != tEOF }
	for {
		t := p.tok
		switch {
		case t.kind == tWord && qualifiers[t.text]:
		case t.kind == tWord && typeKeywords[t.text]:
			if s.ptr > 0 || s.named != "" || s.tag != "" {
				p.cannotFollow(t, s)
				return nil, false
			}
			if msg, hint := s.kw.add(t.text); msg != "" {
				p.errorf(t.pos, hint, "%s", msg)
				return nil, false
			}
			if s.baseTok.kind == tEOF {
				s.baseTok = t
			}
		case t.kind == tWord && tagKeywords[t.text]:
			if haveBase() {
				p.cannotFollow(t, s)
				return nil, false
			}
			p.next()
			tag := p.tok
			if tag.kind != tWord || !probe.ValidName(tag.text) || reservedName(tag.text) {
				p.unexpected(tag, fmt.Sprintf("write %s NAME *, e.g. %s request *", t.text, t.text), fmt.Sprintf("a %s name after %s", t.text, t.text))
				return nil, false
			}
			if p.peek().is("{") {
				p.errorf(p.peek().pos,
					fmt.Sprintf("a probe can only take a pointer to it (%s %s *), which needs no definition", t.text, tag.text),
					"%s definitions are not supported", t.text)
				return nil, false
			}
			s.baseTok = t
			s.tag = t.text + " " + tag.text
			s.words = append(s.words, t.text)
			t = tag
		case t.kind == tWord && haveBase() && p.isTypeName(t.text) && (p.peek().kind == tWord || p.peek().is("*")):
			// C would take t as the declared name and then choke on
			// what follows; saying so is more useful.
			p.cannotFollow(t, s)
			return nil, false
		case t.kind == tWord && !haveBase():
			s.named = t.text
			s.baseTok = t
		case t.is("*"):
			if !haveBase() {
				p.unexpected(t, "a * follows the type it points to, as in char *", "a type before *")
				return nil, false
			}
			if s.ptr == 0 {
				s.nbase = len(s.words)
			}
			s.ptr++
		default:
			if !haveBase() {
				hint := "types are written like int32_t, unsigned long or const char *"
				if t.is(")") && len(s.words) == 0 {
					hint = "is there a comma too many?"
				}
				p.unexpected(t, hint, "a type")
				return nil, false
			}
			return s, true
		}
		s.words = append(s.words, t.text)
		p.next()
	}
}

// cannotFollow reports a type word t that comes after a complete type.
func (p *parser) cannotFollow(t token, s *typeSpec) {
	hint := fmt.Sprintf("%s and %s each name a whole type; keep one", s.text(), t.text)
	if s.ptr > 0 {
		hint = "the words of a type come before its *, as in const unsigned char *"
	}
	p.errorf(t.pos, hint, "%s cannot follow %s", t.text, s.text())
}

func (p *parser) isTypeName(name string) bool {
	return builtinNames[name] || p.aliases[name] != nil
}

// resolve works out the ctype of spec, looking aliases up.
func (p *parser) resolve(s *typeSpec) (ctype, *Error) {
	switch {
	case s.tag != "":
		return ctype{base: s.tag, ptr: s.ptr}, nil
	case s.named == "":
		return ctype{base: s.kw.canonical(), ptr: s.ptr}, nil
	}
	if a, ok := p.aliases[s.named]; ok {
		if a.bad != "" {
			body := "nothing"
			if a.text != "" {
				body = fmt.Sprintf("%q", a.text)
			}
			return ctype{}, &Error{
				Pos: s.baseTok.pos,
				Msg: fmt.Sprintf("%s is a macro, not a type", s.named),
				Hint: fmt.Sprintf("its #define at %d:%d expands to %s (%s); write #define %s TYPE",
					a.pos.Line, a.pos.Col, body, a.bad, s.named),
			}
		}
		t := a.t
		t.ptr += s.ptr
		return t, nil
	}
	if builtinNames[s.named] {
		return ctype{base: s.named, ptr: s.ptr}, nil
	}
	msg := fmt.Sprintf("unknown type %s", s.named)
	if !probe.ValidName(s.named) {
		msg = fmt.Sprintf("expected a type, found %q", s.named)
	}
	hint := "known types are " + knownTypesHint
	if sug := suggest(s.named); sug != "" {
		hint = fmt.Sprintf("did you mean %s? Known types are %s", sug, knownTypesHint)
	} else if probe.ValidName(s.named) {
		hint = fmt.Sprintf("declare it first with the right width, e.g. \"typedef int32_t %s;\", or use a known type: %s", s.named, knownTypesHint)
		if p.sawInclude {
			hint += " (#include is not followed)"
		}
	}
	return ctype{}, &Error{Pos: s.baseTok.pos, Msg: msg, Hint: hint}
}

func (p *parser) parseTypedef() {
	kw := p.tok
	p.next()
	spec, ok := p.parseTypeSpec()
	if !ok {
		p.syncDecl()
		return
	}
	base, err := p.resolve(spec)
	if err != nil {
		p.errs = append(p.errs, err)
		p.syncDecl()
		return
	}
	// Later declarators share the base but not the first one's '*'s:
	// "typedef char *str_t, char_t;".
	baseText := spec.text()
	if spec.ptr > 0 {
		baseText = strings.Join(spec.words[:spec.nbase], " ")
	}
	first, ptr := true, 0
	for {
		name := p.tok
		if name.kind != tWord || !probe.ValidName(name.text) {
			p.unexpected(name, fmt.Sprintf("write typedef TYPE NAME; e.g. typedef %s myname_t;", spec.text()), "a name for the typedef")
			p.syncDecl()
			return
		}
		if reservedName(name.text) {
			p.errorf(name.pos, "keywords keep their meaning; pick another name", "typedef of keyword %s", name.text)
			p.syncDecl()
			return
		}
		t, text := base, spec.text()
		if !first {
			t.ptr += ptr - spec.ptr
			text = baseText
			if ptr > 0 {
				text += " " + strings.Repeat("*", ptr)
			}
		}
		first = false
		p.declare(name, &alias{pos: kw.pos, how: "typedef", t: t, text: text})
		p.next()
		if p.tok.is("[") {
			p.errorf(p.tok.pos, "typedef a pointer instead, or the element type", "array types are not supported")
			p.syncDecl()
			return
		}
		switch {
		case p.tok.is(";"):
			p.next()
			return
		case p.tok.is(","):
			p.next()
			ptr = 0
			for p.tok.is("*") || (p.tok.kind == tWord && qualifiers[p.tok.text]) {
				if p.tok.is("*") {
					ptr++
				}
				p.next()
			}
		default:
			if p.tok.kind == tEOF && p.eofIsBroken {
				return
			}
			p.errorf(p.prevEnd(), "end a typedef with ;", "missing \";\" after typedef %s, found %s", name.text, p.tok.describe())
			p.syncDecl()
			return
		}
	}
}

// syncDecl skips the rest of a broken top-level declaration, including
// any braced body, so that a struct definition costs one error.
func (p *parser) syncDecl() {
	depth := 0
	for p.tok.kind != tEOF {
		switch {
		case p.tok.is("{"):
			depth++
		case p.tok.is("}"):
			depth--
		case depth <= 0 && (p.tok.is("provider") || p.tok.is("typedef")):
			return
		case depth <= 0 && p.tok.is(";"):
			p.next()
			return
		}
		p.next()
	}
}

// parseTagDecl accepts a forward declaration such as "struct request;",
// which C headers shared with a provider file often carry, and refuses
// anything more.
func (p *parser) parseTagDecl() {
	kw := p.tok
	p.next()
	if p.tok.kind == tWord && probe.ValidName(p.tok.text) && !reservedName(p.tok.text) && p.peek().is(";") {
		p.next()
		p.next()
		return
	}
	if p.tok.kind == tWord && p.peek().is("{") {
		p.errorf(p.peek().pos,
			fmt.Sprintf("a probe can only take a pointer to it (%s %s *), which needs no definition", kw.text, p.tok.text),
			"%s definitions are not supported", kw.text)
	} else {
		p.unexpected(p.tok, fmt.Sprintf("only forward declarations such as \"%s request;\" are understood", kw.text), fmt.Sprintf(`";" after %s NAME`, kw.text))
	}
	p.syncDecl()
}

// declare records an alias, refusing to change the meaning of a name
// already in use: C allows repeating a definition, not altering it.
func (p *parser) declare(name token, a *alias) {
	if old, ok := p.aliases[name.text]; ok && !old.sameAs(a) {
		was := "nothing"
		if old.text != "" {
			was = old.text
		}
		p.errorf(name.pos, fmt.Sprintf("the %s at %d:%d defined it as %s", old.how, old.pos.Line, old.pos.Col, was),
			"%s redefined as a different type", name.text)
		return
	}
	p.aliases[name.text] = a
}

// define handles a #define line.
func (p *parser) define(d token) {
	if len(d.body) == 0 {
		p.errorf(d.pos, "write #define NAME TYPE, e.g. #define pid_t int32_t", "#define without a name")
		return
	}
	name := d.body[0]
	switch {
	case name.kind != tWord || !probe.ValidName(name.text):
		p.errorf(name.pos, "write #define NAME TYPE, e.g. #define pid_t int32_t", "invalid macro name %s", name.describe())
		return
	case reservedName(name.text):
		p.errorf(name.pos, "only new type names can be defined", "#define of keyword %s is not supported", name.text)
		return
	case len(d.body) > 1 && d.body[1].is("(") && d.body[1].adjacent:
		p.errorf(name.pos, "only #define NAME TYPE is understood; use a typedef", "function-like macro %s is not supported", name.text)
		return
	}
	a := &alias{pos: d.pos, how: "#define"}
	body := d.body[1:]
	words := make([]string, len(body))
	for i, t := range body {
		words[i] = t.text
	}
	a.text = strings.Join(words, " ")
	if len(body) == 0 {
		a.bad = "not a type"
	} else {
		a.t, a.bad = p.bodyType(body)
	}
	p.declare(name, a)
}

// bodyType parses a #define body as a type, with the parser's machinery,
// keeping any error to itself: a macro that is not a type only becomes an
// error where it is used.
func (p *parser) bodyType(body []token) (ctype, string) {
	saved := struct {
		toks []token
		i    int
		tok  token
		errs []*Error
		eof  bool
	}{p.toks, p.i, p.tok, p.errs, p.eofIsBroken}
	defer func() {
		p.toks, p.i, p.tok, p.errs, p.eofIsBroken = saved.toks, saved.i, saved.tok, saved.errs, saved.eof
	}()

	end := body[len(body)-1].end()
	p.toks = append(append([]token(nil), body...), token{kind: tEOF, pos: end})
	p.i = -1
	p.errs = nil
	p.eofIsBroken = false
	p.next()
	spec, ok := p.parseTypeSpec()
	if !ok {
		if len(p.errs) == 0 {
			return ctype{}, "not a type"
		}
		return ctype{}, p.errs[0].Msg
	}
	if p.tok.kind != tEOF {
		return ctype{}, fmt.Sprintf("%s after the type", p.tok.describe())
	}
	t, err := p.resolve(spec)
	if err != nil {
		return ctype{}, err.Msg
	}
	return t, ""
}
