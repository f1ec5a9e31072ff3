package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Shared is one control plane for all the tests of a package, started by the
// first test that asks for it. Declare it at package level, call Env in each
// test that needs an API server (each working in a namespace of its own),
// and end TestMain with Main:
//
//	var cp testenv.Shared
//
//	func TestMain(m *testing.M) { cp.Main(m) }
//
// Examples can run on it too (ExampleEnv), and assert through their
// "// Output:" comment; name them in Examples then.
type Shared struct {
	// Options for the control plane, read once at the first Env call.
	Options Options
	// Examples is a regular expression (as for go test -run) matching the
	// names of the package's Examples that use ExampleEnv. An Example
	// cannot skip itself, so under -short Main leaves those out, as Env
	// skips tests.
	Examples string

	once sync.Once
	env  *Env
	err  error
}

// Env returns the shared control plane, starting it on first use. Under
// `go test -short` it skips the test instead.
func (s *Shared) Env(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (not started with -short)")
	}
	s.once.Do(func() { s.env, s.err = Start(context.Background(), s.Options) })
	if s.err != nil {
		t.Fatalf("start control plane: %v", s.err)
	}
	return s.env
}

// ExampleEnv returns the shared control plane for an Example, starting it
// on first use; it panics if the control plane cannot start. The package's
// Shared must have Examples set.
func (s *Shared) ExampleEnv() *Env {
	if s.Examples == "" {
		panic("testenv: ExampleEnv on a Shared whose Examples names none: they would start a control plane under -short")
	}
	s.once.Do(func() { s.env, s.err = Start(context.Background(), s.Options) })
	if s.err != nil {
		panic(fmt.Sprintf("start control plane: %v", s.err))
	}
	return s.env
}

// skipUnderShort adds re to -test.skip under -short.
func skipUnderShort(re string) {
	flag.Parse() // m.Run would parse them anyway; Short needs them now
	if !testing.Short() {
		return
	}
	skip := re
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
		skip = f.Value.String() + "|" + skip
	}
	_ = flag.Set("test.skip", skip)
}

// Main switches the cache's mutation detector on (DetectMutations), runs
// the package's tests, stops the shared control plane (writing
// the tail of each process log to stderr when a test failed), checks that no
// goroutine of ours leaked (with GoleakIgnores and the package's own
// ignores, for goroutines a test peer leaves by design), and exits.
func (s *Shared) Main(m *testing.M, ignore ...goleak.Option) {
	DetectMutations()
	if s.Examples != "" {
		skipUnderShort(s.Examples)
	}
	code := m.Run()
	if s.env != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "control-plane logs:\n%s\n", s.env.logTails(30))
		}
		s.env.Stop()
	}
	if code == 0 {
		if err := goleak.Find(append(GoleakIgnores(), ignore...)...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// NewNamespace creates a namespace for a test, named prefix plus a random
// suffix so that repeated runs (go test -count=N) on a shared control plane
// never collide, and returns its name. It fails the test if it cannot. The
// namespace is not deleted afterwards: the control plane is thrown away with
// its tests, and namespace deletion needs kube-controller-manager.
func NewNamespace(t testing.TB, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s-*: %v", prefix, err)
	}
	return ns.Name
}
