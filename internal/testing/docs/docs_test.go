package docs

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the module's root directory, three levels above this package.
const root = "../../.."

// pages lists the pages whose links must resolve, by slash path from the
// root: the front page, the benchmarks and the manual.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "BENCHMARKS.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		rel, err := fromRoot(p)
		files = append(files, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// fromRoot is p's slash path from the root.
func fromRoot(p string) (string, error) {
	rel, err := filepath.Rel(root, p)
	return filepath.ToSlash(rel), err
}

func TestLinks(t *testing.T) {
	parsed := map[string]*page{} // by slash path from the root
	load := func(name string) (*page, error) {
		if p, ok := parsed[name]; ok {
			return p, nil
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		p := parse(string(src))
		parsed[name] = p
		return p, nil
	}
	for _, name := range pages(t) {
		t.Run(name, func(t *testing.T) {
			p, err := load(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range p.links {
				if err := resolve(name, l.target, load); err != nil {
					t.Errorf("%s:%d: link %s: %v", name, l.line, l.target, err)
				}
			}
		})
	}
}

// resolve checks the link target found in page from, as GitHub resolves it:
// a path relative to from's directory (or to the root with a leading /), and
// a fragment that is the anchor of one of the target's headings.
func resolve(from, target string, load func(string) (*page, error)) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	if u.Scheme != "" || u.Host != "" {
		return nil // not the repository's to check
	}
	name := from
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			name = path.Clean(strings.TrimPrefix(u.Path, "/"))
		} else {
			name = path.Join(path.Dir(from), u.Path)
		}
		if name == ".." || strings.HasPrefix(name, "../") {
			return errors.New("leaves the repository")
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err != nil {
			return fmt.Errorf("no such file: %s", name)
		}
	}
	if u.Fragment == "" {
		return nil
	}
	if !strings.HasSuffix(name, ".md") {
		return fmt.Errorf("a fragment on %s, which has no headings", name)
	}
	p, err := load(name)
	if err != nil {
		return err
	}
	if !p.anchors[u.Fragment] {
		return fmt.Errorf("%s has no heading with anchor #%s", name, u.Fragment)
	}
	return nil
}

func TestArchitectureNamesEveryPackage(t *testing.T) {
	const arch = "docs/architecture.md"
	src, err := os.ReadFile(filepath.Join(root, arch))
	if err != nil {
		t.Fatal(err)
	}
	p := parse(string(src))
	named := map[string]bool{}
	for _, s := range p.code {
		named[strings.TrimSuffix(s, "/")] = true
	}
	pkgs := packages(t)
	for _, dir := range pkgs {
		if !named[dir] {
			t.Errorf("%s does not name package %s", arch, dir)
		}
	}
	// A row of the package tables names a package in its first cell: one
	// that no longer exists is as wrong as one missing.
	for _, row := range p.rows {
		if len(row.code) > 0 && !slices.Contains(pkgs, strings.TrimSuffix(row.code[0], "/")) {
			t.Errorf("%s:%d: %s is not a package of the module", arch, row.line, row.code[0])
		}
	}
}

// packages returns the directories of the module's packages relative to
// the root, as go list ./... finds them: directories with Go files for
// this platform, tests included, but testdata, vendor, those whose names
// start with . or _, and other modules.
func packages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if p != root {
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if _, err := build.ImportDir(p, 0); err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return err
		}
		rel, err := fromRoot(p)
		dirs = append(dirs, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no packages found under", root)
	}
	return dirs
}

// page is what the checks read of a Markdown file: outside code blocks
// and code spans, its headings' anchors and its links; its code spans; and
// the code spans in the first cell of each of its table rows.
type page struct {
	anchors map[string]bool
	links   []link
	code    []string
	rows    []row
}

type link struct {
	target string
	line   int
}

type row struct {
	line int
	code []string // the first cell's code spans
}

var (
	heading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	fence   = regexp.MustCompile("^ *(`{3,}|~{3,})")
	// An inline link or image: [text](target "title"). The text may span
	// lines, as an image's long alt text does.
	inline = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// A link reference definition: [label]: target.
	definition = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?`)
)

func parse(src string) *page {
	p := &page{anchors: map[string]bool{}}
	lines := strings.Split(src, "\n")
	// Blank fenced code blocks: what they hold is not Markdown.
	var open string
	for i, l := range lines {
		m := fence.FindStringSubmatch(l)
		switch {
		case open == "" && m != nil:
			open = m[1]
			lines[i] = ""
		case open != "":
			if m != nil && m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(l[len(m[0]):]) == "" {
				open = ""
			}
			lines[i] = ""
		}
	}
	seen := map[string]int{}
	for i, l := range lines {
		if m := heading.FindStringSubmatch(l); m != nil {
			// GitHub makes the anchor from the rendered text: a code
			// span's content counts, and a link's text.
			base := slug(inline.ReplaceAllString(strings.ReplaceAll(m[2], "`", ""), "$1"))
			a := base
			if n := seen[base]; n > 0 {
				a = fmt.Sprintf("%s-%d", base, n)
			}
			seen[base]++
			p.anchors[a] = true
		}
		if cells := strings.Split(strings.TrimSpace(l), "|"); len(cells) > 2 && cells[0] == "" {
			_, code := blankCode(cells[1])
			p.rows = append(p.rows, row{line: i + 1, code: code})
		}
	}
	text, code := blankCode(strings.Join(lines, "\n"))
	p.code = code
	for _, m := range inline.FindAllStringSubmatchIndex(text, -1) {
		p.links = append(p.links, link{target: text[m[4]:m[5]], line: 1 + strings.Count(text[:m[0]], "\n")})
	}
	for _, m := range definition.FindAllStringSubmatchIndex(text, -1) {
		p.links = append(p.links, link{target: text[m[2]:m[3]], line: 1 + strings.Count(text[:m[0]], "\n")})
	}
	return p
}

// blankCode returns text with its code spans blanked out (newlines kept,
// so that line numbers hold), and the spans' contents. A span opens with a
// run of backticks and closes with a run as long, within its paragraph;
// a run without one is literal text.
func blankCode(text string) (string, []string) {
	b := []byte(text)
	var code []string
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 1
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		para := len(b)
		if j := strings.Index(text[i:], "\n\n"); j >= 0 {
			para = i + j
		}
		end := -1
		for j := i + n; j < para; {
			if b[j] != '`' {
				j++
				continue
			}
			m := 1
			for j+m < para && b[j+m] == '`' {
				m++
			}
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		s := strings.ReplaceAll(text[i+n:end], "\n", " ")
		if len(s) > 2 && s[0] == ' ' && s[len(s)-1] == ' ' && strings.Trim(s, " ") != "" {
			s = s[1 : len(s)-1]
		}
		code = append(code, s)
		for k := i; k < end+n; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end + n
	}
	return string(b), code
}

// slug is the anchor GitHub gives a heading of this text: lower case,
// punctuation but hyphens and underscores dropped, each space a hyphen.
func slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
