package surface

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Package is the exported surface of one library package.
type Package struct {
	// Path is the package's directory relative to the module's root, with
	// slashes ("." for the root package).
	Path string
	// Funcs are the exported top-level functions.
	Funcs []string
	// Methods are the exported methods of exported types, as "Type.Method".
	Methods []string
	// Types are the exported types (aliases included).
	Types []string
}

// Total is the number of exported functions, methods and types.
func (p Package) Total() int { return len(p.Funcs) + len(p.Methods) + len(p.Types) }

// Excluded reports whether the directory rel (relative to the module's root,
// with slashes) holds no library package and nothing below it does: the
// samples, the commands, the internal packages, the fault tests (which have
// no API) and the directories of other modules.
func Excluded(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	switch first {
	case "samples", "cmd", "internal", "faults", "bench", "deploy", "tools", "crcache", "docs", "testdata", "vendor":
		return true
	}
	return strings.HasPrefix(first, ".")
}

// Count returns the exported surface of every library package of the module
// rooted at root, ordered by path. A library package is a non-main package
// of the module's own tree that Excluded does not rule out; only its
// non-test files that build on this platform count.
func Count(root string) ([]Package, error) {
	var pkgs []Package
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." && Excluded(rel) {
			return filepath.SkipDir
		}
		p, ok, err := countDir(path, rel)
		if err != nil {
			return err
		}
		if ok {
			pkgs = append(pkgs, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Path, b.Path) })
	return pkgs, nil
}

// countDir counts the package in dir; ok is false when dir holds no
// non-main package.
func countDir(dir, rel string) (p Package, ok bool, err error) {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		if _, none := err.(*build.NoGoError); none {
			return Package{}, false, nil
		}
		return Package{}, false, fmt.Errorf("%s: %w", rel, err)
	}
	if bp.Name == "main" {
		return Package{}, false, nil
	}
	p.Path = rel
	fset := token.NewFileSet()
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return Package{}, false, err
		}
		p.add(f)
	}
	for _, s := range []*[]string{&p.Funcs, &p.Methods, &p.Types} {
		slices.Sort(*s)
	}
	return p, true, nil
}

// add records the exported declarations of one file.
func (p *Package) add(f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				p.Funcs = append(p.Funcs, d.Name.Name)
			} else if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
				p.Methods = append(p.Methods, recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			if d.Tok != token.TYPE {
				continue
			}
			for _, s := range d.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
					p.Types = append(p.Types, ts.Name.Name)
				}
			}
		}
	}
}

// receiverType is the name of a method's receiver type, without pointer and
// type parameters.
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
