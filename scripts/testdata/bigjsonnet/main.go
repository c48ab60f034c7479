// Command bigjsonnet is scripts/bench-scale.sh's larger program: go-jsonnet
// and large standard library packages, all of them reachable, so that
// probing "..." puts 25,000+ probes into one executable. Run without
// arguments it evaluates one snippet; -keep only exists so that the linker
// keeps what the other packages offer.
package main

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"go/ast"
	"go/doc"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	htmltemplate "html/template"
	"image"
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/smtp"
	"os"
	"regexp"
	texttemplate "text/template"

	"github.com/google/go-jsonnet"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-keep" {
		keep()
		return
	}
	out, err := jsonnet.MakeVM().EvaluateAnonymousSnippet("main", `{ answer: 6 * 7 }`)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(out)
}

func keep() {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", "package x\nfunc F() int { return 1 }\n", parser.ParseComments)
	if err != nil {
		panic(err)
	}
	conf := types.Config{Importer: importer.Default()}
	if _, err := conf.Check("x", fset, []*ast.File{f}, nil); err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	format.Node(&buf, fset, f)
	doc.New(&ast.Package{Name: "x", Files: map[string]*ast.File{"x.go": f}}, "x", 0)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		htmltemplate.Must(htmltemplate.New("h").Parse(`<p>{{.}}</p>`)).Execute(w, r.URL.Path)
	}))
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
	c.Get(srv.URL)
	texttemplate.Must(texttemplate.New("t").Parse(`{{.}}`)).Execute(&buf, 1)
	json.Marshal(map[string]any{"a": []int{1}})
	xml.Marshal(struct{ A int }{1})
	zw := zip.NewWriter(&buf)
	zw.Create("a")
	zw.Close()
	gw := gzip.NewWriter(&buf)
	gw.Close()
	sql.Open("none", "")
	mail.ParseAddress("a <a@b.c>")
	smtp.Dial("localhost:0")
	image.Decode(&buf)
	regexp.MustCompile(`a+b`).FindAllString("aab", -1)
}
