package kloop_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// compiles type-checks a file of package x that imports this module, as if
// it stood in a directory of the module, through the go command's overlay
// (nothing is written to the repository). It returns the compiler's output
// and whether the file compiled: the way to test that the type system, not
// a check at run time, refuses a declaration.
func compiles(t *testing.T, src string) (string, bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the go command")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	file := filepath.Join(tmp, "x.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(wd, "internal", "zz_compiletest")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, "x.go"): file}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "overlay.json"), overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.CommandContext(t.Context(), goCmd, "build", "-overlay", filepath.Join(tmp, "overlay.json"), "./internal/zz_compiletest")
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "x.go:") {
		t.Fatalf("go build failed, not on the file: %v\n%s", err, out)
	}
	return string(out), err == nil
}

// wantCompileError checks that src compiles with good in place of the
// marker BAD (every one) and fails, with a message containing want, with bad: the
// positive case shows the failure is the one meant.
func wantCompileError(t *testing.T, src, good, bad, want string) {
	t.Helper()
	if out, ok := compiles(t, strings.ReplaceAll(src, "BAD", good)); !ok {
		t.Fatalf("the well-typed declaration does not compile:\n%s", out)
	}
	out, ok := compiles(t, strings.ReplaceAll(src, "BAD", bad))
	if ok {
		t.Fatalf("%s compiles; want a compile error", bad)
	}
	if !strings.Contains(out, want) {
		t.Errorf("compile error of %s:\n%s\nwant one containing %q", bad, out, want)
	}
}
