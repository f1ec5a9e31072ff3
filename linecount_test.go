package kloop_test

import (
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kloop-dev/kloop"
)

// handWritten returns the non-test Go files matched by the globs, without
// generated ones (zz_generated.*).
func handWritten(t *testing.T, globs ...string) []string {
	t.Helper()
	var files []string
	for _, g := range globs {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.go") && !strings.HasPrefix(filepath.Base(f), "zz_generated.") {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("no files match %v", globs)
	}
	return files
}

// codeLines counts the lines of the files that hold Go code: lines with a
// token that is not a comment. Blank lines and comment lines (doc
// comments, markers, //go: directives) do not count; imports do.
func codeLines(t *testing.T, files []string) int {
	t.Helper()
	total := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		file := fset.AddFile(f, -1, len(src))
		var s scanner.Scanner
		s.Init(file, src, func(pos token.Position, msg string) { t.Errorf("%s: %s", pos, msg) }, 0)
		lines := map[int]bool{}
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.SEMICOLON && lit == "\n" {
				continue // inserted at a line's end
			}
			first := fset.Position(pos).Line
			for l := first; l <= first+strings.Count(lit, "\n"); l++ {
				lines[l] = true
			}
		}
		t.Logf("%s: %d", f, len(lines))
		total += len(lines)
	}
	return total
}

// Issue 9's target: the Foo controller's hand-written Go — API types,
// registration, package docs, wiring, reconcile, manifests, the command —
// is at most 250 lines of code. Generic parts belong in the builder. Issue 38
// made it show a Deployment the API server refuses (a condition, an event
// with a reason of its own): 260.
func TestFooController_HandWrittenGoIsAtMost260LinesOfCode(t *testing.T) {
	files := handWritten(t, "samples/foo/*.go", "samples/foo/apis/samplecontroller/v1alpha1/*.go", "cmd/foo-controller/*.go")
	if n := codeLines(t, files); n > 260 {
		t.Errorf("the Foo controller is %d lines of code, want at most 260", n)
	} else {
		t.Logf("the Foo controller is %d lines of code", n)
	}
}

// podwatch, client-go's workqueue example, is at most 60 lines of code in
// samples/podwatch. Issue 9 asks for 60 with cmd/podwatch too; with the
// command's cobra wiring it is more (logged here), so this guards only the
// package, against growth, until the command shrinks.
func TestPodwatch_PackageIsAtMost60LinesOfCode(t *testing.T) {
	n := codeLines(t, handWritten(t, "samples/podwatch/*.go"))
	if n > 60 {
		t.Errorf("samples/podwatch is %d lines of code, want at most 60", n)
	}
	all := n + codeLines(t, handWritten(t, "cmd/podwatch/*.go"))
	t.Logf("samples/podwatch is %d lines of code; with cmd/podwatch %d (issue 9's target for both: 60)", n, all)
}

// The counter itself: comments, blank lines and a comment in a string.
func TestCodeLines_CountsCodeNotCommentsOrBlankLines(t *testing.T) {
	f := filepath.Join(t.TempDir(), "x.go")
	src := "// Package x.\npackage x\n\n/* a\nblock */\nimport \"fmt\"\n\n// F prints.\nfunc F() {\n\tfmt.Println(`a\n// not a comment`) // trailing\n}\n"
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// package, import, func, the two lines of the raw string, }.
	if n := codeLines(t, []string{f}); n != 6 {
		t.Errorf("codeLines = %d, want 6", n)
	}
}

// The CronJob controller's hand-written Go — both API versions, their
// conversion, the webhooks, scheduling, reconcile, wiring and the command
// — 689 lines when written (the Foo controller is 250), guarded against
// growth.
func TestCronJobController_HandWrittenGoIsAtMost700LinesOfCode(t *testing.T) {
	files := handWritten(t, "samples/cronjob/*.go", "samples/cronjob/apis/batch/*/*.go", "cmd/cronjob-controller/*.go")
	n := codeLines(t, files)
	if n > 700 {
		t.Errorf("the CronJob controller is %d lines of code, want at most 700", n)
	} else {
		t.Logf("the CronJob controller is %d lines of code", n)
	}
	// docs/controllers.md states the count beside the book's: keep it true.
	page, err := os.ReadFile("docs/controllers.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("is %d lines of code", n); !strings.Contains(strings.ReplaceAll(string(page), "\n", " "), want) {
		t.Errorf("docs/controllers.md does not say the CronJob controller %q", want)
	}
}

// Issue 40: the root package is the single-cluster builder, one mode each
// (the fleet is package fleet, on top of it): at most 2,400 lines of code,
// 2,370 when the fleet moved out, 2,380 with the write path beside it,
// guarded against growth.
func TestRootPackage_IsAtMost2380LinesOfCode(t *testing.T) {
	n := codeLines(t, handWritten(t, "*.go"))
	if n > 2380 {
		t.Errorf("the root package is %d lines of code, want at most 2380", n)
	} else {
		t.Logf("the root package is %d lines of code", n)
	}
}

// Issue 40: the root package converts nothing to any and keeps nothing in
// []any (the fleet's per-cluster handles were []any, its builder typing
// bypassed with any(...) casts), and a Handle has one mode: no field that
// only a fleet's handle would set.
func TestRootPackage_HasNoAnyConversionsAndHandleHasOneMode(t *testing.T) {
	for _, f := range handWritten(t, "*.go") {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		var s scanner.Scanner
		s.Init(fset.AddFile(f, -1, len(src)), src, nil, 0)
		var prev [2]string // the two tokens before
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			text := tok.String()
			if tok == token.IDENT {
				text = lit
			}
			switch {
			case text == "(" && prev[1] == "any":
				t.Errorf("%s: any( in the root package", fset.Position(pos))
			case text == "any" && prev[1] == "]" && prev[0] == "[":
				t.Errorf("%s: []any in the root package", fset.Position(pos))
			}
			prev[0], prev[1] = prev[1], text
		}
	}
	for i := range reflect.TypeFor[kloop.Handle[*corev1.Pod]]().NumField() {
		switch name := reflect.TypeFor[kloop.Handle[*corev1.Pod]]().Field(i).Name; name {
		case "fleet", "decl", "each":
			t.Errorf("Handle has the fleet-mode field %s", name)
		}
	}
}
