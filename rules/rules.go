package rules

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-usdt/usdt/internal/probe"
	"gopkg.in/yaml.v3"
)

// DefaultProvider is the provider of the automatic probes when the file
// names none.
const DefaultProvider = "go"

// Rule is one entry of the rules list, with defaults filled in.
type Rule struct {
	Index   int      // position in the rules list, from 0
	Pos     Pos      // where the rule starts in the file
	Package string   // package pattern
	Func    string   // func glob
	Exclude []string // exclude globs
	Entry   bool     // insert an entry probe
	Exit    bool     // insert an exit probe
	Args    bool     // entry passes receiver and parameters, exit passes results
	// Unwind makes the exit probe a deferred call, which also fires when
	// a panic or runtime.Goexit unwinds through the function; without it
	// the exit probe fires at the function's returns only, in fewer bytes.
	Unwind bool
	// KeepInlined (inline: keep) leaves a function that the compiler
	// inlines as written, unprobed, where by default it is probed all
	// the same: a probe costs the inliner a call, so it takes the
	// inlining away unless the function is small enough to keep it with
	// the probe's test and call.
	KeepInlined bool
	// Notes leaves the functions exactly as the compiler makes them: their
	// probes are notes that point at the function's own instructions
	// (sites: notes), which cost nothing untraced, instead of code spliced
	// into it.
	Notes bool
	// Switch leaves the functions exactly as the compiler makes them too,
	// and adds beside each a traced copy with the probes of sites: code,
	// which nothing calls (sites: switch): a switch at run time jumps
	// from the function's entry into its copy.
	Switch bool
	// Attributes are added to the entry probe, after the arguments.
	Attributes []Attribute
	// Context, when its Expr is set, yields the W3C traceparent that the
	// calls join: an attribute with the key ContextKey.
	Context Attribute
}

func (r Rule) String() string {
	return fmt.Sprintf("rule %d at %s (package %q, func %q)", r.Index+1, r.Pos, r.Package, r.Func)
}

// Rules is a parsed rules file. Match and MatchPackage compile the patterns
// on first use, so the exported fields must not change after that; a Rules
// must not be copied once used.
type Rules struct {
	File     string // the file name given to Parse
	Provider string // provider of every automatic probe
	Rules    []Rule
	Hash     string // hex SHA-256 of the file's bytes, for the build cache key

	once sync.Once
	m    *matcher
}

// Load reads and parses the rules file at path.
func Load(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses and validates a rules file; filename is used in positions
// only. On failure the error is an ErrorList holding every problem found,
// each with its position.
func Parse(filename string, data []byte) (*Rules, error) {
	sum := sha256.Sum256(data)
	rs := &Rules{File: filename, Provider: DefaultProvider, Hash: hex.EncodeToString(sum[:])}
	p := &parser{file: filename}

	root, err := decodeYAML(filename, data)
	if err != nil {
		return nil, ErrorList{err}
	}
	p.topLevel(root, rs)
	if len(p.errs) > 0 {
		return nil, p.errs.Finish()
	}
	return rs, nil
}

// decodeYAML parses data as exactly one YAML document and returns its root
// node.
func decodeYAML(file string, data []byte) (root *yaml.Node, err *Error) {
	defer func() {
		// yaml.v3 has had panics on malformed input before; a bad rules
		// file must give an error, never crash the build tool.
		if r := recover(); r != nil {
			root, err = nil, &Error{Pos: Pos{File: file, Line: 1}, Msg: fmt.Sprintf("invalid YAML: parser failed: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if e := dec.Decode(&doc); e != nil {
		if errors.Is(e, io.EOF) {
			return nil, &Error{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: "rules file is empty", Hint: minimalHint}
		}
		return nil, yamlError(file, data, e)
	}
	var next yaml.Node
	switch e := dec.Decode(&next); {
	case errors.Is(e, io.EOF):
	case e != nil:
		return nil, yamlError(file, data, e)
	default:
		return nil, &Error{Pos: posOf(file, &next), Msg: "more than one YAML document",
			Hint: `a rules file holds one document: remove this "---" and merge its rules into the first list`}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &Error{Pos: posOf(file, &doc), Msg: "rules file holds no YAML document", Hint: minimalHint}
	}
	return doc.Content[0], nil
}

const providerHint = "USDT provider names are letters, digits and _, not starting with a digit, e.g. shop or my_shop"

const inlineHint = `inline is "probe" (functions the compiler inlines are probed all the same, the default) or "keep" (they stay as written, unprobed)`

const sitesHint = `sites is "code" (probes spliced into the function: a test of a semaphore untraced, the call's elapsed time at exit, the in-process ring), "notes" (the function as the compiler made it, with notes at its first instruction and its returns: nothing untraced, a slower fire, no elapsed time) or "switch" (the function as the compiler made it, and beside it a traced copy with the probes of "code", to switch to at run time)`

const minimalHint = `a rules file needs at least: rules: [{package: "example.com/mod/..."}]`

func posOf(file string, n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: file, Line: 1}
	}
	return Pos{File: file, Line: max(n.Line, 1), Col: n.Column}
}

// parser walks the YAML tree, filling a Rules and collecting errors. It goes
// on after an error so that one run reports every problem.
type parser struct {
	file string
	errs ErrorList
}

func (p *parser) errorf(n *yaml.Node, hint, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: posOf(p.file, n), Msg: fmt.Sprintf(format, args...), Hint: hint})
}

var (
	topKeys  = []string{"provider", "rules"}
	ruleKeys = []string{"package", "func", "exclude", "probes", "args", "unwind", "inline", "sites", "attributes", "context"}
)

// topLevel reads the top-level mapping: provider and the rules list.
func (p *parser) topLevel(root *yaml.Node, rs *Rules) {
	n := deref(root)
	if isNull(n) {
		// "---" alone, or a document of comments after it.
		p.errorf(root, minimalHint, "rules file is empty")
		return
	}
	if n == nil || n.Kind != yaml.MappingNode {
		if n != nil && n.Kind == yaml.SequenceNode {
			p.errorf(root, `put the list under a key: "rules:" followed by the list`, "rules file is a list, want a mapping with provider and rules keys")
			return
		}
		p.errorf(root, minimalHint, "rules file is %s, want a mapping with provider and rules keys", describe(n))
		return
	}
	var rulesNode *yaml.Node
	misplaced := false // a rule key or a misspelt "rules" explains the missing rules
	p.mapping(n, topKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "provider":
			s, ok := p.str("provider", v, strHints{null: `remove the key to use the default "go"`, other: providerHint})
			if !ok {
				return
			}
			if !probe.ValidName(s) {
				p.errorf(v, providerHint,
					"invalid provider name %q", s)
				return
			}
			rs.Provider = s
		case "rules":
			rulesNode = v
		}
	}, func(key string) string {
		if slices.Contains(ruleKeys, key) {
			misplaced = true
			return `rule keys go inside the list: "rules:", then "- package: ..." indented below it`
		}
		if suggest(key, topKeys) == "rules" {
			misplaced = true
		}
		return ""
	})
	if rulesNode == nil {
		if !misplaced {
			p.errorf(n, minimalHint, "missing rules")
		}
		return
	}
	p.rules(rulesNode, rs)
}

// rules reads the rules list.
func (p *parser) rules(v *yaml.Node, rs *Rules) {
	seq := deref(v)
	if seq == nil || seq.Kind != yaml.SequenceNode {
		if seq != nil && seq.Kind == yaml.MappingNode {
			p.errorf(v, `start each rule with "- ", e.g. "- package: example.com/shop/..."`, "rules must be a list of rules, not a mapping")
			return
		}
		if isNull(seq) {
			p.errorf(v, minimalHint, "rules list is empty")
			return
		}
		p.errorf(v, minimalHint, "rules must be a list of rules, not %s", describe(seq))
		return
	}
	if len(seq.Content) == 0 {
		p.errorf(v, minimalHint, "rules list is empty")
		return
	}
	for i, item := range seq.Content {
		r := Rule{Index: i, Pos: posOf(p.file, item), Func: "*", Entry: true, Exit: true, Args: true}
		p.rule(item, &r)
		rs.Rules = append(rs.Rules, r)
	}
}

// rule reads one rule into r, which holds the defaults.
func (p *parser) rule(item *yaml.Node, r *Rule) {
	n := deref(item)
	if n == nil || n.Kind != yaml.MappingNode {
		hint := `each rule is a mapping: "- package: example.com/shop/..." with func, exclude, probes and args below it`
		p.errorf(item, hint, "rule must be a mapping, not %s", describe(n))
		return
	}
	hasPackage := false
	var unwind, atEntry, notes *yaml.Node
	p.mapping(n, ruleKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "package":
			hasPackage = true
			s, ok := p.str("package", v, strHints{list: "write one rule per package pattern"})
			if !ok {
				return
			}
			if _, prob := parsePkgPattern(s); prob != nil {
				p.errorf(v, prob.hint, "%s", prob.msg)
			}
			r.Package = s
		case "func":
			s, ok := p.str("func", v, strHints{
				null: `remove the key to use the default "*"`,
				list: "func takes one glob: write one rule per glob, or use exclude for the exceptions",
			})
			if !ok {
				return
			}
			if _, prob := parseFuncGlob(s); prob != nil {
				p.errorf(v, prob.hint, "%s", prob.msg)
			}
			r.Func = s
		case "exclude":
			r.Exclude = p.globList(k, v)
		case "probes":
			r.Entry, r.Exit = p.probes(k, v)
		case "args":
			if b, ok := p.boolean(k, v); ok {
				r.Args = b
			}
		case "unwind":
			if b, ok := p.boolean(k, v); ok {
				r.Unwind = b
				unwind = k
			}
		case "inline":
			s, ok := p.str("inline", v, strHints{null: `remove the key to probe inlined functions too (the default, "probe")`, other: inlineHint})
			if !ok {
				return
			}
			switch s {
			case "keep":
				r.KeepInlined = true
			case "probe":
			default:
				p.errorf(v, inlineHint, "invalid inline %q", s)
			}
		case "sites":
			s, ok := p.str("sites", v, strHints{null: `remove the key for probes spliced into the functions (the default, "code")`, other: sitesHint})
			if !ok {
				return
			}
			switch s {
			case "code":
			case "notes":
				r.Notes = true
				notes = k
			case "switch":
				r.Switch = true
			default:
				p.errorf(v, sitesHint, "invalid sites %q", s)
			}
		case "attributes":
			r.Attributes = p.attributes(k, v)
			atEntry = k
		case "context":
			if a, ok := p.expression("context", ContextKey, v); ok {
				r.Context = a
			}
			atEntry = k
		}
	}, func(key string) string {
		if slices.Contains(topKeys, key) {
			return key + " belongs at the top level of the file, not inside a rule"
		}
		return ""
	})
	if unwind != nil && !r.Exit {
		p.errorf(unwind, "remove unwind, or add exit to probes", "unwind is about exit probes, and rule %d has none", r.Index+1)
	}
	if notes != nil {
		for _, needs := range []*yaml.Node{unwind, atEntry} {
			if needs != nil {
				p.errorf(needs, `remove sites: notes, or this key: it needs code in the function`, "%s needs probes spliced into the function, and rule %d has sites: notes", needs.Value, r.Index+1)
			}
		}
	}
	if atEntry != nil && !r.Entry {
		p.errorf(atEntry, "add entry to probes", "%s is evaluated when the entry probe fires, and rule %d has none", atEntry.Value, r.Index+1)
	}
	if !hasPackage {
		p.errorf(item, `every rule needs an import path pattern, e.g. package: "example.com/shop/..."`, "rule %d has no package", r.Index+1)
	}
}

// mapping checks the keys of n (types, duplicates, unknown names) and calls
// each for every valid key. extraHint may explain a known key that is in the
// wrong place.
func (p *parser) mapping(n *yaml.Node, valid []string, each func(key string, k, v *yaml.Node), extraHint func(string) string) {
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kd := deref(k)
		if kd != nil && kd.Kind == yaml.ScalarNode && kd.ShortTag() == "!!merge" {
			p.errorf(k, "repeat the keys in each rule; aliases of single values, such as exclude: *common, do work", "merge keys (<<) are not supported")
			continue
		}
		if kd == nil || kd.Kind != yaml.ScalarNode || kd.ShortTag() != "!!str" {
			p.errorf(k, "valid keys are: "+strings.Join(valid, ", "), "key must be a name, not %s", describe(kd))
			continue
		}
		key := kd.Value
		if first, dup := seen[key]; dup {
			p.errorf(k, "remove one of them", "duplicate key %q (first at line %d, column %d)", key, first.Line, first.Column)
			continue
		}
		seen[key] = k
		if !slices.Contains(valid, key) {
			hint := extraHint(key)
			if hint == "" {
				hint = "valid keys are: " + strings.Join(valid, ", ")
				if s := suggest(key, valid); s != "" {
					hint = fmt.Sprintf("did you mean %q? %s", s, hint)
				}
			}
			p.errorf(k, hint, "unknown key %q", key)
			continue
		}
		each(key, k, v)
	}
}

// str returns v as a string. YAML resolves unquoted true, 12 or ~ to other
// types; those are reported rather than turned into strings, because
// "package: 12" is far more likely a mistake than a package. what names the
// value in the message; the hints say what to do instead of an empty value
// or a list, where the generic advice to quote would be wrong.
func (p *parser) str(what string, v *yaml.Node, h strHints) (string, bool) {
	n := deref(v)
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return n.Value, true
	}
	hint := cmp.Or(h.other, "quote the value")
	switch {
	case isNull(n) && h.null != "":
		hint = h.null
	case n != nil && n.Kind == yaml.SequenceNode && h.list != "":
		hint = h.list
	case n != nil && n.Kind != yaml.ScalarNode:
		hint = ""
	}
	p.errorf(v, hint, "%s must be a string, not %s", what, describe(n))
	return "", false
}

type strHints struct{ null, list, other string }

func (p *parser) boolean(k, v *yaml.Node) (value, ok bool) {
	n := deref(v)
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		switch strings.ToLower(n.Value) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	hint := "write true or false"
	if n != nil && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		hint = "write true or false, without quotes"
	}
	p.errorf(v, hint, "%s must be true or false, not %s", k.Value, describe(n))
	return false, false
}

// list returns the elements of a sequence value, or reports listHint.
func (p *parser) list(k, v *yaml.Node, listHint string) ([]*yaml.Node, bool) {
	n := deref(v)
	if n == nil || n.Kind != yaml.SequenceNode {
		p.errorf(v, listHint, "%s must be a list, not %s", k.Value, describe(n))
		return nil, false
	}
	return n.Content, true
}

func (p *parser) globList(k, v *yaml.Node) []string {
	hint := `write a list, even for one glob: exclude: ["*.String"]`
	if n := deref(v); n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		hint = fmt.Sprintf("write a list, even for one glob: exclude: [%q]", n.Value)
	}
	elems, ok := p.list(k, v, hint)
	if !ok {
		return nil
	}
	globs := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := p.str("each exclude glob", e, strHints{})
		if !ok {
			continue
		}
		if _, prob := parseFuncGlob(s); prob != nil {
			p.errorf(e, prob.hint, "%s", prob.msg)
			continue
		}
		globs = append(globs, s)
	}
	return globs
}

var probeKinds = []string{"entry", "exit"}

func (p *parser) probes(k, v *yaml.Node) (entry, exit bool) {
	hint := "write a list: probes: [entry, exit]"
	if n := deref(v); n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		hint = fmt.Sprintf("write a list, even for one probe: probes: [%s]", n.Value)
	}
	elems, ok := p.list(k, v, hint)
	if !ok {
		return true, true
	}
	if len(elems) == 0 {
		p.errorf(v, "list entry, exit or both; to insert no probes, delete the rule", "probes list is empty")
		return true, true
	}
	for _, e := range elems {
		n := deref(e)
		if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			p.errorf(e, "valid probes are: entry, exit", "each probe must be entry or exit, not %s", describe(n))
			continue
		}
		switch s := n.Value; s {
		case "entry":
			entry = true
		case "exit":
			exit = true
		default:
			hint := "valid probes are: entry, exit"
			if sug := suggest(s, probeKinds); sug != "" {
				hint = fmt.Sprintf("did you mean %q? %s", sug, hint)
			}
			p.errorf(e, hint, "unknown probe %q", s)
		}
	}
	return entry, exit
}

// deref follows aliases to the anchored node. yaml.v3 never builds an alias
// of an alias, but the bound keeps a hand-made cycle from hanging us.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i == 8 {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a value's type for error messages.
func describe(n *yaml.Node) string {
	if n == nil {
		return "an unresolvable alias"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		switch tag := n.ShortTag(); tag {
		case "!!str":
			return fmt.Sprintf("the string %q", v)
		case "!!null":
			return "an empty value"
		case "!!bool":
			return "the boolean " + v
		case "!!int", "!!float":
			return "the number " + v
		default:
			return fmt.Sprintf("a %s value", tag)
		}
	}
	return "an unsupported YAML value"
}

// wellKnownMistakes maps names people plausibly write to the key they mean,
// where edit distance would not find it.
var wellKnownMistakes = map[string]string{
	"pkg": "package", "pkgs": "package", "packages": "package", "import": "package", "path": "package",
	"function": "func", "functions": "func", "funcs": "func", "fn": "func", "name": "func", "method": "func", "methods": "func",
	"excludes": "exclude", "skip": "exclude", "ignore": "exclude",
	"probe": "probes", "enter": "entry", "start": "entry", "return": "exit", "end": "exit", "leave": "exit",
	"arguments": "args", "params": "args",
	"panic": "unwind", "panics": "unwind", "goexit": "unwind",
	"rule": "rules",
}

// suggest returns the valid name closest to s, or "" when none is close.
func suggest(s string, valid []string) string {
	if m, ok := wellKnownMistakes[strings.ToLower(s)]; ok && slices.Contains(valid, m) {
		return m
	}
	if len(s) > 64 {
		return "" // far from every key; keeps the table small
	}
	best, bestD := "", 3 // at most two edits away
	for _, v := range valid {
		if d := editDistance(strings.ToLower(s), v); d < bestD {
			best, bestD = v, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes;
// keys and import paths are ASCII, so bytes are enough.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// matcher is the compiled form of a Rules, built once, with a hit flag per
// rule for Unused.
type matcher struct {
	rules []compiled
}

type compiled struct {
	rule    *Rule
	pkg     pkgPattern
	fn      funcGlob
	exclude []funcGlob
	invalid bool // a pattern did not compile: the rule matches nothing
	hit     atomic.Bool
}
