package values

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzJSONString: AppendJSONString quotes any string as encoding/json
// does.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a&b>", "\x00\x1f\x7f\b\f\n\r\t\"\\", "é\u2028\u2029", "\xff\xfe\xc3", "\xed\xa0\x80"} {
		f.Add(s)
	}
	for c := range 256 {
		f.Add(string([]byte{byte(c)}))
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); !sameJSON(string(got), string(want)) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}

// sameJSON compares AppendJSON's output with encoding/json's, where Go
// 1.27's writes U+FFFD for an invalid byte itself and 1.26's escapes it,
// as AppendJSON does: the same string either way.
func sameJSON(got, want string) bool {
	return strings.ReplaceAll(got, `\ufffd`, "\uFFFD") == strings.ReplaceAll(want, `\ufffd`, "\uFFFD")
}

// TestJSONData: JSONData is a struct's, a slice's or a map's value
// itself, or a pointer's to one, and JSON() for any other; either way
// AppendJSONData and encoding/json write what they write of JSON()'s
// tree, and so does AppendJSON of the value, and the exporter's switch
// on it (string, bool, int64, uint64, else the text) sees a scalar where
// it did.
func TestJSONData(t *testing.T) {
	num := func(n int64) Value { return integer(n) }
	str := text("a<b")
	obj := object{fields: []field{{name: "ID", value: num(1)}, {name: "Name", value: str}, {name: "Items", value: list{elems: []Value{num(1), num(-2)}, len: 2}}}}
	full := mapValue{entries: []entry{{str, num(2)}, {text("b"), obj}}, len: 2}
	for _, c := range []struct {
		name string
		v    Value
		lazy bool
	}{
		{"integer", num(-42), false},
		{"natural", natural(1 << 63), false},
		{"boolean", boolean(true), false},
		{"duration", duration(1500), false},
		{"text", str, false},
		{"null", null{}, false},
		{"pointer to a scalar", pointer{num(7)}, false},
		{"struct", obj, true},
		{"pointer to a struct", pointer{obj}, true},
		{"pointer to a pointer to a struct", pointer{pointer{obj}}, true},
		{"slice", list{elems: []Value{str, obj}, len: 2}, true},
		{"slice not read", list{len: 3}, true},
		{"map", full, true},
		{"map partly read", mapValue{entries: full.entries[:1], len: 5}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := JSONData(c.v)
			if _, same := data.(Value); same != c.lazy {
				t.Errorf("JSONData is %T, want the value itself: %v", data, c.lazy)
			}
			want, err := json.Marshal(c.v.JSON())
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(data)
			if err != nil || !sameJSON(string(got), string(want)) {
				t.Errorf("encoding/json: %s, %v; want %s", got, err, want)
			}
			got, err = AppendJSONData(nil, data)
			if err != nil || !sameJSON(string(got), string(want)) {
				t.Errorf("AppendJSONData: %s, %v; want %s", got, err, want)
			}
			got, err = AppendJSON(nil, c.v)
			if err != nil || !sameJSON(string(got), string(want)) {
				t.Errorf("AppendJSON: %s, %v; want %s", got, err, want)
			}
		})
	}
}
