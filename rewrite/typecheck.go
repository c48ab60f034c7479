package rewrite

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-usdt/usdt/internal/importcfg"
)

// typeCheck checks the package against the export data the compiler itself
// will read, named by its -importcfg, so the types are exactly the
// compiler's. Instrumenting needs the declarations, not the function
// bodies, which the compiler checks: without them, type-checking takes
// less than half the time (go/types: 48 to 16 ms, net/http: 51 to 24 ms).
//
// Most of what remains is reading the export data of the imports, and most
// imports serve function bodies only (fmt, strings, errors, ...). So
// without bodies, a first check reads only the imports the declarations
// name (see declImports) and stands an empty package in for each other.
// When a signature then holds an invalid type, a stand-in was needed after
// all, and the package is checked again with every import read. real
// returns the package a stand-in stands for, read on first use, and any
// other package as it is. Without useStandIns every import is read.
func typeCheck(cfg Config, fset *token.FileSet, files []*file, bodies, useStandIns bool) (pkg *types.Package, info *types.Info, real func(*types.Package) *types.Package, err error) {
	packagefile, importmap, err := importcfg.Read(cfg.ImportCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if mapped, ok := importmap[path]; ok {
			path = mapped
		}
		file, ok := packagefile[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q in %s", path, cfg.ImportCfg)
		}
		return os.Open(file)
	}
	asts := make([]*ast.File, len(files))
	for i, f := range files {
		asts[i] = f.ast
	}
	check := func(imp types.Importer, onError func(error)) (*types.Package, *types.Info, error) {
		conf := types.Config{
			Importer:         imp,
			Sizes:            types.SizesFor("gc", cfg.GOARCH),
			GoVersion:        cfg.GoVersion,
			IgnoreFuncBodies: !bodies,
			Error:            onError,
		}
		info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
		pkg, err := conf.Check(cfg.ImportPath, fset, asts, info)
		return pkg, info, err
	}
	gc := importer.ForCompiler(fset, "gc", lookup).(types.ImporterFrom)
	if !bodies && useStandIns && standInImports {
		if needed, behind, ok := declImports(asts); ok {
			imp := &standIns{ImporterFrom: gc, needed: needed, behind: behind, made: map[*types.Package]bool{}}
			// Uses of a stand-in are errors: the check goes on past them,
			// and the signatures tell.
			pkg, info, _ := check(imp, func(error) {})
			if validSignatures(asts, info) {
				return pkg, info, imp.real, nil
			}
		}
	}
	pkg, info, err = check(gc, nil)
	return pkg, info, func(p *types.Package) *types.Package { return p }, err
}

// standInImports lets typeCheck stand empty packages in for imports; the
// tests turn it off to compare.
var standInImports = true

// standIns imports the packages of needed, by their paths as the source
// writes them, and gives every other an empty package, but for the
// placeholders behind says it declares.
type standIns struct {
	types.ImporterFrom
	needed map[string]bool
	behind map[string]*placeholders
	made   map[*types.Package]bool
}

func (s *standIns) Import(path string) (*types.Package, error) {
	return s.ImportFrom(path, "", 0)
}

func (s *standIns) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	if s.needed[path] || path == "unsafe" {
		return s.ImporterFrom.ImportFrom(path, dir, mode)
	}
	pkg := types.NewPackage(path, guessName(path))
	if b := s.behind[path]; b != nil {
		pkg.SetName(b.name)
		for name := range b.types {
			obj := types.NewTypeName(token.NoPos, pkg, name, nil)
			types.NewNamed(obj, types.NewStruct(nil, nil), nil)
			pkg.Scope().Insert(obj)
		}
	}
	pkg.MarkComplete()
	s.made[pkg] = true
	return pkg, nil
}

// real returns the package p stands for, if p is a stand-in, or nil if its
// export data cannot be read; p itself otherwise.
func (s *standIns) real(p *types.Package) *types.Package {
	if !s.made[p] {
		return p
	}
	real, err := s.ImporterFrom.ImportFrom(p.Path(), "", 0)
	if err != nil {
		return nil
	}
	return real
}

// declImports returns the import paths whose names the declarations that
// instrumenting reads use: receivers, parameters, results and type
// parameters; the declarations of types defined by another named type,
// whose kind is that type's; constants, which may give an array its
// length. The rest, fields and methods of a declared struct or interface,
// variables and function bodies, instrumenting never looks into: a kind
// of a struct, an interface or a function type is that, whatever its parts
// are. It reports false when those declarations use a name that no import
// has, as far as the paths tell (an import named otherwise than its
// path's last element, which guessNames cannot mend): the stand-ins cannot
// be chosen then.
//
// A type named behind a pointer, slice, map, channel or function type of
// a parameter or result (*jsonnet.VM), or of a pointer type's declaration,
// leaves the kind that: what it is does not matter. Its import is read
// only if named otherwise too; else behind gives the stand-in the names to
// declare, as empty structs, since go/types makes a pointer to an invalid
// type invalid. An import the file renames has no name to give the
// stand-in, which type strings qualify types with, and is read.
func declImports(files []*ast.File) (needed map[string]bool, behind map[string]*placeholders, ok bool) {
	needed = map[string]bool{}
	behind = map[string]*placeholders{}
	for _, f := range files {
		names := map[string]string{} // name in this file -> path
		renamed := map[string]bool{}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return nil, nil, false
			}
			if spec.Name != nil {
				switch n := spec.Name.Name; n {
				case ".":
					needed[p] = true
				case "_":
				default:
					names[n] = p
					renamed[n] = true
				}
				continue
			}
			for _, n := range guessNames(p) {
				if q, dup := names[n]; dup && q != p {
					renamed[n] = true // ambiguous: read whichever it is
				}
				names[n] = p
			}
		}
		// In a declaration, a selector's operand is a package.
		ok := true
		use := func(n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				if sel, isSel := n.(*ast.SelectorExpr); isSel {
					if x, isIdent := sel.X.(*ast.Ident); isIdent {
						if p, imported := names[x.Name]; imported {
							needed[p] = true
						} else {
							ok = false
						}
					}
				}
				return true
			})
		}
		hide := func(n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.IndexExpr, *ast.IndexListExpr:
					use(n) // a generic type, which a placeholder is not
					return false
				case *ast.SelectorExpr:
					x, isIdent := n.X.(*ast.Ident)
					if !isIdent || renamed[x.Name] {
						use(n)
						return false
					}
					p, imported := names[x.Name]
					if !imported {
						use(n)
						return false
					}
					if behind[p] == nil {
						behind[p] = &placeholders{name: x.Name, types: map[string]bool{}}
					}
					behind[p].types[n.Sel.Name] = true
					return false
				}
				return true
			})
		}
		useField := func(list *ast.FieldList) {
			if list == nil {
				return
			}
			for _, field := range list.List {
				switch t := ast.Unparen(field.Type).(type) {
				case *ast.StarExpr, *ast.MapType, *ast.ChanType, *ast.FuncType, *ast.Ellipsis:
					hide(t)
				case *ast.ArrayType:
					if t.Len == nil {
						hide(t)
					} else {
						use(t)
					}
				default:
					use(t)
				}
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					use(d.Recv)
				}
				if d.Type.TypeParams != nil {
					use(d.Type.TypeParams)
				}
				useField(d.Type.Params)
				useField(d.Type.Results)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						switch ast.Unparen(s.Type).(type) {
						case *ast.Ident, *ast.SelectorExpr, *ast.IndexExpr, *ast.IndexListExpr:
							use(s)
						case *ast.StarExpr:
							if s.TypeParams != nil {
								use(s.TypeParams)
							}
							hide(s.Type)
						}
					case *ast.ValueSpec:
						if d.Tok != token.CONST {
							continue
						}
						if s.Type != nil {
							use(s.Type)
						}
						for _, v := range s.Values {
							use(v)
						}
					}
				}
			}
		}
		if !ok {
			return nil, nil, false
		}
	}
	for p := range needed {
		delete(behind, p)
	}
	return needed, behind, true
}

// placeholders are the types a stand-in declares (see declImports), and
// the name the files import it under.
type placeholders struct {
	name  string
	types map[string]bool
}

// guessNames are the names the package at path may have, as far as the
// path tells: guessName's, or when that is no identifier (go-jsonnet),
// what it is without a "go-" prefix or a "-go" suffix, or without dashes.
func guessNames(p string) []string {
	name := guessName(p)
	if token.IsIdentifier(name) {
		return []string{name}
	}
	var names []string
	for _, n := range []string{
		strings.TrimSuffix(strings.TrimPrefix(name, "go-"), "-go"),
		strings.ReplaceAll(name, "-", ""),
	} {
		if token.IsIdentifier(n) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// versionElem is a major version's path element, which a package's name
// does not repeat.
var versionElem = regexp.MustCompile(`^v[0-9]+$`)

// guessName is the name the package at path has, as far as the path tells:
// its last element, or the one before a major version, up to a dot
// (gopkg.in/yaml.v3 is yaml).
func guessName(p string) string {
	dir, name := path.Split(p)
	if versionElem.MatchString(name) && dir != "" {
		name = path.Base(dir)
	}
	name, _, _ = strings.Cut(name, ".")
	return name
}

// validSignatures reports whether every function the files declare has a
// signature without invalid types: none of them names a stand-in.
func validSignatures(files []*ast.File, info *types.Info) bool {
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			obj, ok := info.Defs[fd.Name].(*types.Func)
			if !ok || hasInvalid(obj.Type(), map[types.Type]bool{}) {
				return false
			}
		}
	}
	return true
}

// hasInvalid reports whether t is, or is made of, an invalid type. A named
// type's underlying type is the type declaration's business, whose names
// are all imported (see declImports).
func hasInvalid(t types.Type, seen map[types.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Basic:
		return t.Kind() == types.Invalid
	case *types.Pointer:
		return hasInvalid(t.Elem(), seen)
	case *types.Slice:
		return hasInvalid(t.Elem(), seen)
	case *types.Array:
		return hasInvalid(t.Elem(), seen)
	case *types.Chan:
		return hasInvalid(t.Elem(), seen)
	case *types.Map:
		return hasInvalid(t.Key(), seen) || hasInvalid(t.Elem(), seen)
	case *types.Tuple:
		for i := range t.Len() {
			if hasInvalid(t.At(i).Type(), seen) {
				return true
			}
		}
	case *types.Signature:
		if r := t.Recv(); r != nil && hasInvalid(r.Type(), seen) {
			return true
		}
		for i := range t.TypeParams().Len() {
			if hasInvalid(t.TypeParams().At(i).Constraint(), seen) {
				return true
			}
		}
		return hasInvalid(t.Params(), seen) || hasInvalid(t.Results(), seen)
	case *types.Struct:
		for i := range t.NumFields() {
			if hasInvalid(t.Field(i).Type(), seen) {
				return true
			}
		}
	case *types.Interface:
		for i := range t.NumEmbeddeds() {
			if hasInvalid(t.EmbeddedType(i), seen) {
				return true
			}
		}
		for i := range t.NumExplicitMethods() {
			if hasInvalid(t.ExplicitMethod(i).Type(), seen) {
				return true
			}
		}
	case *types.Union:
		for i := range t.Len() {
			if hasInvalid(t.Term(i).Type(), seen) {
				return true
			}
		}
	case *types.Named:
		// A declaration whose array length a stand-in's constant gives is
		// broken, and what kind of value it is decides how it is passed.
		if u, ok := t.Underlying().(*types.Basic); ok && u.Kind() == types.Invalid {
			return true
		}
		if a, ok := t.Underlying().(*types.Array); ok && a.Len() < 0 {
			return true
		}
		for i := range t.TypeArgs().Len() {
			if hasInvalid(t.TypeArgs().At(i), seen) {
				return true
			}
		}
	case *types.Alias:
		return hasInvalid(types.Unalias(t), seen)
	}
	return false
}
