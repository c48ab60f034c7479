package provider

import (
	"fmt"
	"strings"

	"github.com/go-usdt/usdt/internal/probe"
)

// ctype is a C type reduced to what decides its probe.Kind: the base type
// with qualifiers dropped and integer keywords put in one canonical order,
// and the number of '*' on top of it. Aliases resolve to a ctype, so that a
// typedef of a typedef costs nothing.
type ctype struct {
	// base is a canonical keyword combination ("unsigned char", "long"),
	// a built-in name ("uint32_t", "string"), "bool", "void", "float",
	// or a tagged type ("struct foo").
	base string
	ptr  int
}

// scalarKinds maps the base types that may be passed by value. It is the
// product's documented table; canonical keyword combinations stand for all
// their spellings ("long long int" is "long").
var scalarKinds = map[string]probe.Kind{
	"int8_t":         probe.Int8,
	"char":           probe.Int8,
	"signed char":    probe.Int8,
	"uint8_t":        probe.Uint8,
	"unsigned char":  probe.Uint8,
	"int16_t":        probe.Int16,
	"short":          probe.Int16,
	"uint16_t":       probe.Uint16,
	"unsigned short": probe.Uint16,
	"int32_t":        probe.Int32,
	"int":            probe.Int32,
	"uint32_t":       probe.Uint32,
	"unsigned int":   probe.Uint32,
	"int64_t":        probe.Int64,
	"long":           probe.Int64,
	"ssize_t":        probe.Int64,
	"intptr_t":       probe.Int64,
	"off_t":          probe.Int64,
	"uint64_t":       probe.Uint64,
	"unsigned long":  probe.Uint64,
	"size_t":         probe.Uint64,
	"uintptr_t":      probe.Uintptr,
	"string":         probe.String,
	"bool":           probe.Bool,
}

// builtinNames are the type names that are not C keywords. A file may
// redefine them (PostgreSQL's probes.d has "#define bool unsigned char"),
// so aliases are looked up first.
var builtinNames = map[string]bool{
	"int8_t": true, "uint8_t": true, "int16_t": true, "uint16_t": true,
	"int32_t": true, "uint32_t": true, "int64_t": true, "uint64_t": true,
	"ssize_t": true, "size_t": true, "intptr_t": true, "uintptr_t": true,
	"off_t": true, "string": true, "bool": true,
}

// typeKeywords are the C keywords that make up a base type by themselves.
var typeKeywords = map[string]bool{
	"signed": true, "unsigned": true, "short": true, "long": true,
	"int": true, "char": true, "void": true, "_Bool": true,
	"float": true, "double": true,
}

var qualifiers = map[string]bool{
	"const": true, "volatile": true, "restrict": true,
	"__restrict": true, "__restrict__": true,
}

var tagKeywords = map[string]bool{"struct": true, "union": true, "enum": true}

// reservedNames may not be redefined: C keywords, and the words this
// grammar gives a meaning to.
func reservedName(s string) bool {
	return typeKeywords[s] || qualifiers[s] || tagKeywords[s] ||
		s == "typedef" || s == "provider" || s == "probe"
}

// knownTypesHint is what an unknown type is answered with: the whole table,
// short enough to read.
const knownTypesHint = "int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t, " +
	"intptr_t, uintptr_t, ssize_t, size_t, off_t, char, short, int, long, long long (signed or unsigned), " +
	"bool, _Bool, string, and pointers such as char * or struct foo *"

// keywordSpec accumulates the integer keywords of a base type, in any
// order, as C allows.
type keywordSpec struct {
	signed, unsigned, short, long, int, char int
	other                                    string // void, _Bool, float or double
}

// add records keyword w and, if the combination has become invalid, says
// why and how to fix it.
func (k *keywordSpec) add(w string) (msg, hint string) {
	const oneType = "write a single integer type such as unsigned short, int, long long or uint64_t"
	if k.other != "" {
		return fmt.Sprintf("%s cannot be combined with %s", w, k.other), oneType
	}
	var n *int
	switch w {
	case "signed":
		n = &k.signed
	case "unsigned":
		n = &k.unsigned
	case "short":
		n = &k.short
	case "long":
		n = &k.long
	case "int":
		n = &k.int
	case "char":
		n = &k.char
	default:
		if k.signed+k.unsigned+k.short+k.long+k.int+k.char > 0 {
			return fmt.Sprintf("%s cannot be combined with %s", w, k.spelling()), oneType
		}
		k.other = w
		return "", ""
	}
	*n++
	switch {
	case k.long > 2:
		return "long long long is too long", "the widest integer is long long (64 bits)"
	case k.signed > 1 || k.unsigned > 1 || k.short > 1 || k.int > 1 || k.char > 1:
		return fmt.Sprintf("duplicate %s", w), fmt.Sprintf("remove one %s", w)
	case k.signed > 0 && k.unsigned > 0:
		return "a type cannot be both signed and unsigned", "keep one of signed and unsigned"
	case k.char > 0 && k.short+k.long+k.int > 0,
		k.short > 0 && k.long > 0:
		return fmt.Sprintf("%s cannot be combined with %s", w, k.without(w)), oneType
	}
	return "", ""
}

// without spells the combination so far minus one occurrence of w, for
// error messages.
func (k *keywordSpec) without(w string) string {
	c := *k
	switch w {
	case "short":
		c.short--
	case "long":
		c.long--
	case "int":
		c.int--
	case "char":
		c.char--
	}
	return c.spelling()
}

func (k *keywordSpec) spelling() string {
	var words []string
	rep := func(n int, w string) {
		for range n {
			words = append(words, w)
		}
	}
	rep(k.signed, "signed")
	rep(k.unsigned, "unsigned")
	rep(k.short, "short")
	rep(k.long, "long")
	rep(k.char, "char")
	rep(k.int, "int")
	return strings.Join(words, " ")
}

// canonical returns the base this valid combination stands for, the key of
// scalarKinds. "signed" is dropped except for char, whose plain form is a
// string when pointed to.
func (k *keywordSpec) canonical() string {
	if k.other != "" {
		if k.other == "_Bool" {
			return "bool"
		}
		return k.other
	}
	prefix := ""
	if k.unsigned > 0 {
		prefix = "unsigned "
	}
	switch {
	case k.char > 0:
		if k.signed > 0 {
			return "signed char"
		}
		return prefix + "char"
	case k.short > 0:
		return prefix + "short"
	case k.long > 0:
		return prefix + "long"
	}
	return prefix + "int"
}

// kindError explains why a value of type t cannot be a probe argument.
type kindError struct{ msg, hint string }

// kind maps t onto a probe.Kind.
func (t ctype) kind() (probe.Kind, *kindError) {
	if t.ptr > 0 {
		if t.ptr == 1 && t.base == "char" {
			return probe.String, nil
		}
		return probe.Pointer, nil
	}
	if k, ok := scalarKinds[t.base]; ok {
		return k, nil
	}
	switch {
	case t.base == "void":
		return probe.Invalid, &kindError{
			"void is not a value",
			`write "()" or "(void)" for a probe without arguments, or "void *" for an address`,
		}
	case t.base == "float" || t.base == "double":
		return probe.Invalid, &kindError{
			fmt.Sprintf("floating-point type %s is not supported", t.base),
			"USDT arguments are integers or pointers; pass the value scaled to an integer, or its IEEE bits as uint64_t",
		}
	case strings.HasPrefix(t.base, "enum "):
		return probe.Invalid, &kindError{
			fmt.Sprintf("%s is not supported", t.base),
			"the size of an enum is up to the C compiler; pass it as int32_t or another fixed-size integer",
		}
	}
	return probe.Invalid, &kindError{
		fmt.Sprintf("%s passed by value is not supported", t.base),
		fmt.Sprintf("a probe argument must fit in a register: pass a pointer (%s *) or its fields as separate arguments", t.base),
	}
}

// suggest returns a known type name close to an unknown one, or "".
func suggest(name string) string {
	l := strings.ToLower(name)
	for _, c := range []string{l, l + "_t", "u" + strings.TrimPrefix(l, "u_")} {
		if c != name && (builtinNames[c] || typeKeywords[c]) {
			return c
		}
	}
	switch strings.TrimPrefix(l, "__") {
	case "u8":
		return "uint8_t"
	case "u16":
		return "uint16_t"
	case "u32":
		return "uint32_t"
	case "u64":
		return "uint64_t"
	case "s8", "i8":
		return "int8_t"
	case "s16", "i16":
		return "int16_t"
	case "s32", "i32":
		return "int32_t"
	case "s64", "i64":
		return "int64_t"
	case "boolean":
		return "bool"
	}
	return ""
}
