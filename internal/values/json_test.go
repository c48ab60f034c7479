package values

import (
	"encoding/json"
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
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}
