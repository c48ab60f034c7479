package rules

import (
	"fmt"
	goparser "go/parser"
	"strings"

	"gopkg.in/yaml.v3"
)

// Attribute is a span attribute a rule adds to the calls it selects: a Go
// expression over the function's receiver and parameters, evaluated when
// the entry probe fires, only while someone traces.
type Attribute struct {
	Key  string
	Expr string
	Pos  Pos // where the expression stands, for errors of type checking
}

// ContextKey is the key of the attribute that a rule's context becomes:
// the W3C traceparent the call joins.
const ContextKey = "usdt.traceparent"

const attributesHint = `attributes map names to Go expressions over the parameters: attributes: {order.path: "r.URL.Path"}`

const attributeKeyHint = "an attribute's name has a namespace, as OpenTelemetry's do (order.path, client.id): letters, digits, _, - and /, in at least two parts joined by dots"

// attributes reads a rule's attributes mapping, in the file's order.
func (p *parser) attributes(k, v *yaml.Node) []Attribute {
	n := deref(v)
	if n == nil || n.Kind != yaml.MappingNode {
		p.errorf(v, attributesHint, "attributes must be a mapping, not %s", describe(n))
		return nil
	}
	var attrs []Attribute
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := deref(n.Content[i]), n.Content[i+1]
		if kn == nil || kn.Kind != yaml.ScalarNode {
			p.errorf(n.Content[i], attributeKeyHint, "an attribute's name must be a string, not %s", describe(kn))
			continue
		}
		key := kn.Value
		if msg := checkAttributeKey(key); msg != "" {
			p.errorf(kn, attributeKeyHint, "attribute %q %s", key, msg)
			continue
		}
		if seen[key] {
			p.errorf(kn, "remove one of them", "duplicate attribute %q", key)
			continue
		}
		seen[key] = true
		if a, ok := p.expression("attribute "+key, key, vn); ok {
			attrs = append(attrs, a)
		}
	}
	return attrs
}

// expression reads a Go expression, which must parse.
func (p *parser) expression(what, key string, v *yaml.Node) (Attribute, bool) {
	s, ok := p.str(what, v, strHints{other: `quote the Go expression, e.g. "r.URL.Path"`})
	if !ok {
		return Attribute{}, false
	}
	if _, err := goparser.ParseExpr(s); err != nil {
		p.errorf(v, "write one Go expression over the function's receiver and parameters, e.g. r.Header.Get(\"X-Tenant\")", "%s: %q is not a Go expression: %v", what, s, err)
		return Attribute{}, false
	}
	return Attribute{Key: key, Expr: s, Pos: posOf(p.file, v)}, true
}

// checkAttributeKey says what is wrong with an attribute's name, or "".
// The namespace keeps the names apart from the parameters' (Go
// identifiers, which have no dot) and from the tracer's own.
func checkAttributeKey(key string) string {
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/", r)) {
			return fmt.Sprintf("has %q", r)
		}
	}
	parts := strings.Split(key, ".")
	if len(parts) < 2 {
		return "has no namespace"
	}
	for _, part := range parts {
		if part == "" {
			return "has an empty part"
		}
	}
	switch parts[0] {
	case "usdt", "args", "results", "code", "process", "thread":
		return fmt.Sprintf("is in the namespace %q, which the tracer's own attributes use", parts[0])
	}
	return ""
}
