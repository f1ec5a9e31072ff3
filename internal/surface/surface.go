package surface

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Package is the exported surface of one library package.
type Package struct {
	// Path is the package's directory relative to the module's root, with
	// slashes ("." for the root package).
	Path string
	// Funcs are the exported top-level functions.
	Funcs []string
	// Methods are the exported methods of exported types, as "Type.Method",
	// and those an alias of another package's type brings in.
	Methods []string
	// Types are the exported types (aliases included).
	Types []string
	// Reached are the types of internal packages that an exported
	// signature names, as "path.Type", and their exported methods, as
	// "path.Type.Method": a user reaches them without importing them.
	Reached []string
	// Unnameable are the exported declarations whose type names an
	// unexported type of the package or a type of an internal package, as
	// "Decl: type": a user can use them but cannot write their type.
	Unnameable []string
	// InitAssigns are the assignments, in an init function, to another
	// package's variable, as "file: pkg.Var": a hook filled behind the
	// compiler's back.
	InitAssigns []string
}

// Total is the number of exported functions, methods and types, and of the
// internal types and methods the package's signatures reach.
func (p Package) Total() int {
	return len(p.Funcs) + len(p.Methods) + len(p.Types) + len(p.Reached)
}

// Excluded reports whether the directory rel (relative to the module's root,
// with slashes) holds no library package and nothing below it does: the
// samples, the commands, the internal packages, the fault tests (which have
// no API) and the directories of other modules.
func Excluded(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	switch first {
	case "samples", "cmd", "internal", "faults", "bench", "deploy", "tools", "crcache", "oteltest", "docs", "testdata", "vendor":
		return true
	}
	return strings.HasPrefix(first, ".")
}

// Count returns the exported surface of every library package of the module
// rooted at root, ordered by path. A library package is a non-main package
// of the module's own tree that Excluded does not rule out; only its
// non-test files that build on this platform count.
func Count(root string) ([]Package, error) {
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	m := &mod{root: root, path: module, parsed: make(map[string]*parsed)}
	var pkgs []Package
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		pp, err := m.parse(rel)
		if err != nil {
			return err
		}
		if pp != nil {
			p, err := m.count(pp)
			if err != nil {
				return err
			}
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

// modulePath reads the module path from root's go.mod.
func modulePath(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}

// mod is a module's tree, its packages parsed on demand.
type mod struct {
	root, path string
	parsed     map[string]*parsed // by directory relative to root; nil: no non-main package
}

// parsed is one package's non-test files.
type parsed struct {
	rel   string
	files []*ast.File
	types map[string]bool // the package-level types, exported or not
}

// parse parses the package in the directory rel; nil when it holds no
// non-main package.
func (m *mod) parse(rel string) (*parsed, error) {
	if p, ok := m.parsed[rel]; ok {
		return p, nil
	}
	m.parsed[rel] = nil
	dir := filepath.Join(m.root, filepath.FromSlash(rel))
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		if _, none := err.(*build.NoGoError); none {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if bp.Name == "main" {
		return nil, nil
	}
	p := &parsed{rel: rel, types: make(map[string]bool)}
	fset := token.NewFileSet()
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.TYPE {
				for _, s := range d.Specs {
					p.types[s.(*ast.TypeSpec).Name.Name] = true
				}
			}
		}
	}
	m.parsed[rel] = p
	return p, nil
}

// internal reports whether the import path is of a package under an
// internal directory.
func internal(importPath string) bool {
	return strings.HasSuffix(importPath, "/internal") || strings.Contains(importPath, "/internal/")
}

// count counts the exported surface of p.
func (m *mod) count(pp *parsed) (Package, error) {
	p := Package{Path: pp.rel}
	reached := make(map[string]bool)
	// aliased are the other packages' types an exported alias names: the
	// user names them by the alias.
	aliased := make(map[string]bool)
	for _, f := range pp.files {
		imports := importsOf(f)
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.TYPE {
				for _, s := range d.Specs {
					s := s.(*ast.TypeSpec)
					if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() && s.Name.IsExported() {
						if x, ok := sel.X.(*ast.Ident); ok {
							aliased[imports[x.Name]+"."+sel.Sel.Name] = true
						}
					}
				}
			}
		}
	}
	for _, f := range pp.files {
		imports := importsOf(f)
		// use records a type an exported declaration names: an unexported
		// type of the package, or a type of an internal package.
		use := func(decl string) func(e ast.Expr) {
			return func(e ast.Expr) {
				switch t := e.(type) {
				case *ast.Ident:
					if !t.IsExported() && pp.types[t.Name] {
						p.Unnameable = append(p.Unnameable, decl+": "+t.Name)
					}
				case *ast.SelectorExpr:
					x, ok := t.X.(*ast.Ident)
					if !ok || !internal(imports[x.Name]) || aliased[imports[x.Name]+"."+t.Sel.Name] {
						return
					}
					p.Unnameable = append(p.Unnameable, decl+": "+imports[x.Name]+"."+t.Sel.Name)
					reached[imports[x.Name]+"."+t.Sel.Name] = true
				}
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.Name == "init" && d.Recv == nil && d.Body != nil {
					p.InitAssigns = append(p.InitAssigns, initAssigns(d.Body, imports)...)
				}
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := receiverType(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					name = recv + "." + name
					p.Methods = append(p.Methods, name)
				} else {
					p.Funcs = append(p.Funcs, name)
				}
				typeRefs(d.Type, use(name))
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						p.Types = append(p.Types, s.Name.Name)
						typeRefs(s.Type, use(s.Name.Name))
						if s.Assign.IsValid() {
							if err := m.aliasMethods(&p, imports, s); err != nil {
								return Package{}, err
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Type != nil {
								typeRefs(s.Type, use(n.Name))
							}
						}
					}
				}
			}
		}
	}
	for r := range reached {
		p.Reached = append(p.Reached, r)
	}
	// The exported methods of the internal types reached.
	for _, r := range slices.Clone(p.Reached) {
		dot := strings.LastIndex(r, ".")
		methods, err := m.methodsOf(r[:dot], r[dot+1:])
		if err != nil {
			return Package{}, err
		}
		for _, meth := range methods {
			p.Reached = append(p.Reached, r+"."+meth)
		}
	}
	for _, s := range []*[]string{&p.Funcs, &p.Methods, &p.Types, &p.Reached, &p.Unnameable, &p.InitAssigns} {
		slices.Sort(*s)
		*s = slices.Compact(*s)
	}
	return p, nil
}

// aliasMethods adds to p the exported methods that the alias s brings in
// from a type of another package of the module.
func (m *mod) aliasMethods(p *Package, imports map[string]string, s *ast.TypeSpec) error {
	t := s.Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		}
		break
	}
	sel, ok := t.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return nil
	}
	methods, err := m.methodsOf(imports[x.Name], sel.Sel.Name)
	if err != nil {
		return err
	}
	for _, meth := range methods {
		p.Methods = append(p.Methods, s.Name.Name+"."+meth)
	}
	return nil
}

// methodsOf returns the exported methods of the type name of the package
// importPath, when that package is the module's; none otherwise.
func (m *mod) methodsOf(importPath, name string) ([]string, error) {
	rel, ok := strings.CutPrefix(importPath, m.path)
	if !ok || (rel != "" && rel[0] != '/') {
		return nil, nil
	}
	rel = strings.TrimPrefix(rel, "/")
	if rel == "" {
		rel = "."
	}
	pp, err := m.parse(rel)
	if err != nil || pp == nil {
		return nil, err
	}
	var methods []string
	for _, f := range pp.files {
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.FuncDecl); ok && d.Recv != nil && d.Name.IsExported() &&
				receiverType(d.Recv.List[0].Type) == name {
				methods = append(methods, d.Name.Name)
			}
		}
	}
	return methods, nil
}

// initAssigns returns the other packages' variables, as "pkg.Var", that
// the body of an init function assigns to.
func initAssigns(body *ast.BlockStmt, imports map[string]string) []string {
	var out []string
	ast.Inspect(body, func(n ast.Node) bool {
		a, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for _, lhs := range a.Lhs {
			for {
				switch e := lhs.(type) {
				case *ast.IndexExpr:
					lhs = e.X
					continue
				case *ast.StarExpr:
					lhs = e.X
					continue
				}
				break
			}
			if sel, ok := lhs.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && imports[x.Name] != "" {
					out = append(out, x.Name+"."+sel.Sel.Name)
				}
			}
		}
		return true
	})
	return out
}

// importsOf maps the names f refers to its imports by to their paths.
func importsOf(f *ast.File) map[string]string {
	imports := make(map[string]string)
	for _, is := range f.Imports {
		p, err := strconv.Unquote(is.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(p)
		if is.Name != nil {
			name = is.Name.Name
		}
		imports[name] = p
	}
	return imports
}

// typeRefs calls use with each type name (an identifier or a qualified
// identifier) the type expression e refers to, leaving out the unexported
// fields of structs and methods of interfaces, which a user cannot reach.
func typeRefs(e ast.Expr, use func(ast.Expr)) {
	ast.Inspect(e, func(n ast.Node) bool {
		switch t := n.(type) {
		case *ast.Ident, *ast.SelectorExpr:
			use(t.(ast.Expr))
			return false
		case *ast.StructType:
			fields(t.Fields, false, use)
			return false
		case *ast.InterfaceType:
			fields(t.Methods, false, use)
			return false
		case *ast.FuncType:
			// Type parameters name constraints, not the types used.
			fields(t.Params, true, use)
			fields(t.Results, true, use)
			return false
		}
		return true
	})
}

// fields walks the types of l's fields: all of them (a function's
// parameters and results), or only the exported and embedded ones (a
// struct's fields, an interface's methods).
func fields(l *ast.FieldList, all bool, use func(ast.Expr)) {
	if l == nil {
		return
	}
	for _, f := range l.List {
		reachable := all || len(f.Names) == 0
		for _, n := range f.Names {
			reachable = reachable || n.IsExported()
		}
		if reachable {
			typeRefs(f.Type, use)
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
