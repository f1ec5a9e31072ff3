package testlint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// repoRoot is the repository's root, two levels up from this package.
const repoRoot = "../.."

// allowed are the waits the repository-wide check accepts, by
// "file:function" (the file relative to the repository's root), each with
// the reason. Keep it short: an entry is a wait that no event can drive.
// (internal/testwait.Authorized and QuotaEnforced, the polls on API caches, are not in test files.)
var allowed = map[string]string{
	"faults/silent_test.go:TestFault_SilentWatch_NoticedReconnectedAndCaughtUp": "holds the " +
		"blackhole for the length of the fault under test; it waits for no goroutine and no state",
}

// TestRepo_NoWallClockWaitsInTests parses every _test.go file of the
// repository (every module but bench/, whose programs are not tests) and
// fails naming each wait that may run on the wall clock.
func TestRepo_NoWallClockWaitsInTests(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	used := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || rel == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, w := range WallClockWaits(fset, f) {
			key := filepath.ToSlash(rel) + ":" + w.Func
			if _, ok := allowed[key]; ok {
				used[key] = true
				continue
			}
			t.Errorf("%s:%d: %s outside a synctest bubble (in %s): wait on a channel, a condition (testenv/await), a fake clock or testing/synctest instead",
				filepath.ToSlash(rel), w.Pos.Line, w.Call, w.Func)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A walk that found nothing would pass vacuously.
	if files < 100 {
		t.Fatalf("checked only %d test files under %s; is the repository root right?", files, repoRoot)
	}
	for key := range allowed {
		if !used[key] {
			t.Errorf("allowed %s waits no more (or moved): remove it from the list", key)
		}
	}
}

func check(t *testing.T, src string) []Finding {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return WallClockWaits(fset, f)
}

func TestWallClockWaits_ReportsOnlyWaitsOutsideABubble(t *testing.T) {
	src := `package p

import (
	"testing"
	st "testing/synctest"
	clock "time"
)

func TestA(t *testing.T) {
	clock.Sleep(1) // line 10: wall clock
	st.Test(t, func(t *testing.T) {
		clock.Sleep(1) // in the bubble
		go func() { clock.Sleep(1) }() // a goroutine of the bubble
		<-clock.After(1)
		clock.NewTicker(1)
	})
	st.Run(func() { clock.Sleep(1) })
	go func() {
		clock.Sleep(1) // line 19: a goroutine outside any bubble
	}()
}

func helper() { clock.Sleep(1) } // line 23: lexically outside

func TestB(t *testing.T) {
	st.Test(t, func(t *testing.T) { helper() })
	f := func() { clock.Sleep(1) } // line 27: a literal not passed to synctest
	st.Test(t, f)
}
`
	var got []string
	for _, f := range check(t, src) {
		got = append(got, f.Func+":"+string(rune('0'+f.Pos.Line/10))+string(rune('0'+f.Pos.Line%10)))
	}
	if want := []string{"TestA:10", "TestA:19", "helper:23", "TestB:27"}; !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
}

func TestWallClockWaits_ReportsTickersAndBareAfterButNotADeadlineCase(t *testing.T) {
	src := `package p

import (
	"testing"
	"time"
)

type h struct{}

func (*h) poll(ch chan int) {
	tick := time.NewTicker(time.Millisecond) // line 11
	for range time.Tick(1) {                 // line 12
	}
	<-time.After(time.Second) // line 14
	select {
	case <-ch:
	case <-time.After(time.Second): // a deadline
	}
	_ = tick
}
`
	var got []string
	for _, f := range check(t, src) {
		got = append(got, f.Call+" in "+f.Func)
	}
	if want := []string{"time.NewTicker in h.poll", "time.Tick in h.poll", "<-time.After in h.poll"}; !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
}

func TestWallClockWaits_ReportsApimachineryPolls(t *testing.T) {
	src := `package p

import (
	"testing"

	w "k8s.io/apimachinery/pkg/util/wait"
)

func TestA(t *testing.T) {
	_ = w.PollUntilContextTimeout(nil, 1, 1, true, nil)
	_ = w.Poll(1, 1, nil)
	_ = w.ErrWaitTimeout
}
`
	var got []string
	for _, f := range check(t, src) {
		got = append(got, f.Call)
	}
	if want := []string{"wait.PollUntilContextTimeout", "wait.Poll"}; !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
}

func TestWallClockWaits_IgnoresAFileThatDoesNotImportTime(t *testing.T) {
	src := `package p

import "testing"

type clock struct{}

func (clock) Sleep(int) {}

var time clock

func TestA(t *testing.T) { time.Sleep(1) }
`
	if got := check(t, src); len(got) != 0 {
		t.Errorf("reported %v in a file that does not import time", got)
	}
}

// testSupport are the packages, by directory, whose code is for tests and
// may import package testing; every other package is library or program
// code, which must not (it would link the testing package, and test-only
// behaviour, into every program that uses it).
var testSupport = map[string]string{
	"testenv":              "the control plane tests run against; its helpers take a testing.TB",
	"internal/authtest":    "RBAC fixtures for tests",
	"internal/reexec":      "runs a test binary again as a command under test",
	"internal/metricstest": "reads metrics for test assertions",
}

// TestRepo_LibraryCodeDoesNotImportTesting parses every non-test Go file of
// the repository (but bench/'s) and fails naming each one outside
// testSupport that imports package testing.
func TestRepo_LibraryCodeDoesNotImportTesting(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || rel == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if _, ok := testSupport[filepath.ToSlash(filepath.Dir(rel))]; ok {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			if imp.Path.Value == `"testing"` || strings.HasPrefix(imp.Path.Value, `"testing/`) {
				t.Errorf("%s imports %s: library and program code must not; take what it needs as an interface (see testenv/await.TB), or move it to a test-support package", filepath.ToSlash(rel), imp.Path.Value)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("checked only %d files: is repoRoot right?", files)
	}
}

// kloopInternal is the prefix of kloop's internal packages.
const kloopInternal = "github.com/kloop-dev/kloop/internal"

// internalImports returns the kloop internal packages f imports.
func internalImports(f *ast.File) []string {
	var out []string
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err == nil && (p == kloopInternal || strings.HasPrefix(p, kloopInternal+"/")) {
			out = append(out, p)
		}
	}
	return out
}

// TestRepo_SamplesUseOnlyPublicPackages parses every Go file under
// samples/, tests included, and fails naming each import of a kloop
// internal package: a sample is what users copy, and what its tests need
// users' tests need too, but Go lets no other module import internal/.
// Make what is missing public (testenv/await) or do without it.
func TestRepo_SamplesUseOnlyPublicPackages(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	root := filepath.Join(repoRoot, "samples")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(repoRoot, path)
		for _, p := range internalImports(f) {
			t.Errorf("%s imports %s: samples may use only packages a user's module can import", filepath.ToSlash(rel), p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("checked only %d files under %s: is repoRoot right?", files, root)
	}
}

func TestInternalImports_FindsKloopsInternalPackagesOnly(t *testing.T) {
	src := `package p

import (
	"github.com/kloop-dev/kloop/internal/testwait"
	w "github.com/kloop-dev/kloop/internal/kindgate"
	"github.com/kloop-dev/kloop/internalish"
	"github.com/kloop-dev/kloop/testenv/await"
	"example.com/other/internal/x"
)
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"github.com/kloop-dev/kloop/internal/testwait", "github.com/kloop-dev/kloop/internal/kindgate"}
	if got := internalImports(f); !slices.Equal(got, want) {
		t.Errorf("internalImports = %v, want %v", got, want)
	}
}
