package testlint

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
)

// Finding is one wait the check reports.
type Finding struct {
	Pos token.Position
	// Call is what waits: "time.Sleep", "time.NewTicker", "time.Tick",
	// "<-time.After" or "wait.Poll..." (apimachinery's).
	Call string
	// Func is the name of the top-level function (or method, as
	// "Type.Method") the call is in, "" outside any.
	Func string
}

func (f Finding) String() string { return f.Pos.String() + ": " + f.Call + " in " + f.Func }

// WallClockWaits returns the waits of f that may run on the wall clock:
// those not inside a function literal passed to synctest.Test or
// synctest.Run.
func WallClockWaits(fset *token.FileSet, f *ast.File) []Finding {
	c := checker{fset: fset, time: importName(f, "time"), synctest: importName(f, "testing/synctest"),
		wait: importName(f, "k8s.io/apimachinery/pkg/util/wait")}
	if c.time == "" && c.wait == "" {
		return nil
	}
	for _, decl := range f.Decls {
		c.fn = ""
		if fd, ok := decl.(*ast.FuncDecl); ok {
			c.fn = funcName(fd)
		}
		ast.Inspect(decl, c.visit)
	}
	return c.out
}

type checker struct {
	fset                 *token.FileSet
	time, synctest, wait string // the names the file imports them under ("" if not)
	fn                   string
	out                  []Finding
}

func (c *checker) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CallExpr:
		if c.synctest != "" && isCall(n, c.synctest, "Test", "Run") {
			// A literal passed here runs in the bubble; other arguments
			// (t, a named function) are checked as usual.
			for _, arg := range n.Args {
				if _, lit := arg.(*ast.FuncLit); !lit {
					ast.Inspect(arg, c.visit)
				}
			}
			return false
		}
		for _, name := range []string{"Sleep", "NewTicker", "Tick"} {
			if c.time != "" && isCall(n, c.time, name) {
				c.report(n, "time."+name)
			}
		}
		if sel, ok := n.Fun.(*ast.SelectorExpr); ok && c.wait != "" && strings.HasPrefix(sel.Sel.Name, "Poll") && isCall(n, c.wait, sel.Sel.Name) {
			c.report(n, "wait."+sel.Sel.Name)
		}
	case *ast.CommClause:
		// A receive from time.After as a select case is a deadline: check
		// only what the case does.
		for _, st := range n.Body {
			ast.Inspect(st, c.visit)
		}
		return false
	case *ast.ExprStmt:
		if u, ok := n.X.(*ast.UnaryExpr); ok && u.Op == token.ARROW {
			if call, ok := u.X.(*ast.CallExpr); ok && c.time != "" && isCall(call, c.time, "After") {
				c.report(n, "<-time.After")
				return false
			}
		}
	}
	return true
}

func (c *checker) report(n ast.Node, call string) {
	c.out = append(c.out, Finding{Pos: c.fset.Position(n.Pos()), Call: call, Func: c.fn})
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// isCall reports whether call is pkg.Name(...) for one of names.
func isCall(call *ast.CallExpr, pkg string, names ...string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok || id.Name != pkg {
		return false
	}
	for _, n := range names {
		if sel.Sel.Name == n {
			return true
		}
	}
	return false
}

// importName is the name under which f imports path, "" if it does not
// (or only for its side effects, or with a dot).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != path {
			continue
		}
		if imp.Name != nil {
			if imp.Name.Name == "_" || imp.Name.Name == "." {
				return ""
			}
			return imp.Name.Name
		}
		return path[strings.LastIndex(path, "/")+1:]
	}
	return ""
}
