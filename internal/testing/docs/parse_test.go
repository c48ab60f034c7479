package docs

import (
	"maps"
	"slices"
	"testing"
)

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Which kernels", "which-kernels"},
		{"Scale: thousands of probes in one program", "scale-thousands-of-probes-in-one-program"},
		{"Counting in the kernel: trace -stats on a JSON API server", "counting-in-the-kernel-trace--stats-on-a-json-api-server"},
		{"The nop1+nop5 pair (branch nop15)", "the-nop1nop5-pair-branch-nop15"},
		{"The wrapper's start-up: the exporters in usdt-export", "the-wrappers-start-up-the-exporters-in-usdt-export"},
		{"The test suite on Go 1.27.3", "the-test-suite-on-go-1273"},
		{"usdt_auto and µs", "usdt_auto-and-µs"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name        string
		src         string
		links       []string
		anchors     []string
		code        []string
		firstColumn [][]string
	}{
		{
			name:  "inline link and image",
			src:   "See [a](a.md#x) and ![pic](p.png \"title\").\n",
			links: []string{"a.md#x", "p.png"},
		},
		{
			name:  "alt text over two lines",
			src:   "![a long\nalt text](docs/p.png)\n",
			links: []string{"docs/p.png"},
		},
		{
			name: "code is not Markdown",
			src:  "`[a](in-span.md)` and ``x ` [b](in-double.md)``\n\n```\n[c](in-fence.md)\n# not a heading\n```\n",
			code: []string{"[a](in-span.md)", "x ` [b](in-double.md)"},
		},
		{
			name:  "a lone backtick stays literal",
			src:   "it's a ` tick\n\nthen [d](d.md)\n",
			links: []string{"d.md"},
		},
		{
			name:  "reference definition",
			src:   "[ref]: other.md#y\n",
			links: []string{"other.md#y"},
		},
		{
			name:    "anchors from rendered text, duplicates numbered",
			src:     "# Title\n## How to run\n### How to run\n## Exit probes: `unwind: false`\n## See [design](design.md) ##\n",
			anchors: []string{"title", "how-to-run", "how-to-run-1", "exit-probes-unwind-false", "see-design"},
			links:   []string{"design.md"},
			code:    []string{"unwind: false"},
		},
		{
			name:        "table rows",
			src:         "| package | concern |\n| --- | --- |\n| `rules` | the `rules.yml` |\n| plain | x |\n",
			code:        []string{"rules", "rules.yml"},
			firstColumn: [][]string{nil, nil, {"rules"}, nil},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := parse(c.src)
			var links []string
			for _, l := range p.links {
				links = append(links, l.target)
			}
			if !slices.Equal(links, c.links) {
				t.Errorf("links %q, want %q", links, c.links)
			}
			if c.anchors != nil {
				got := slices.Sorted(maps.Keys(p.anchors))
				want := slices.Sorted(slices.Values(c.anchors))
				if !slices.Equal(got, want) {
					t.Errorf("anchors %q, want %q", got, want)
				}
			}
			if !slices.Equal(p.code, c.code) {
				t.Errorf("code %q, want %q", p.code, c.code)
			}
			if c.firstColumn != nil {
				var got [][]string
				for _, r := range p.rows {
					got = append(got, r.code)
				}
				if !slices.EqualFunc(got, c.firstColumn, slices.Equal) {
					t.Errorf("first columns %q, want %q", got, c.firstColumn)
				}
			}
		})
	}
}
