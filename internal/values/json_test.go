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
