package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/internal/ctxwait"
	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

func TestMain(m *testing.M) {
	testenv.DetectMutations()
	// Re-executed by a test: behave as the foo-controller command itself.
	reexec.Main(func(args []string) int {
		os.Args = append([]string{"foo-controller"}, args...)
		main()
		return 0
	})
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

// lines collects a stream's lines; closed is closed at EOF, and changed
// notified at each line.
type lines struct {
	mu      sync.Mutex
	all     []string
	closed  chan struct{}
	changed await.Signal
}

func collect(r io.Reader) *lines {
	l := &lines{closed: make(chan struct{})}
	go func() {
		defer close(l.closed)
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			l.mu.Lock()
			l.all = append(l.all, s.Text())
			l.mu.Unlock()
			l.changed.Notify()
		}
	}()
	return l
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// With sample-controller's own crd.yaml, which has no status subresource,
// the controller writes status by updating the whole Foo. It is started
// before the CRD is installed, and waits for it, ready.
func TestFooController_SampleControllersPlainCRDAndExampleReachAvailableAndSIGTERMExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{ControllerManager: true})
	ctx := t.Context()
	plain, err := os.ReadFile("../../samples/foo/artifacts/examples/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}

	simCtx, stopSim := context.WithCancel(context.Background())
	simDone := make(chan error, 1)
	go func() {
		simDone <- podsim.Run(simCtx, e.Config, podsim.Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	}()
	t.Cleanup(func() {
		stopSim()
		if err := <-simDone; err != nil {
			t.Errorf("podsim: %v", err)
		}
	})

	cmd := reexec.Command(context.Background(), "--kubeconfig", e.KubeconfigPath, "--health-probe-bind-address", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	logs := collect(stderr)
	defer func() {
		if t.Failed() {
			t.Logf("foo-controller stderr:\n%s", logs)
		}
	}()

	// Before the CRD: ready, and waiting for Foo.
	var readyz string
	await.Until(t, "foo-controller serving /readyz", logs.changed.Changed, func() bool {
		_, rest, _ := strings.Cut(logs.String(), `msg="Serving /healthz, /readyz" addr=`)
		addr := strings.Fields(rest)
		if len(addr) == 0 {
			return false
		}
		readyz = "http://" + strings.Trim(addr[0], `"`) + "/readyz?verbose"
		return true
	})
	await.Until(t, "foo-controller ready, waiting for kind Foo", logs.changed.Changed, func() bool {
		resp, err := http.Get(readyz)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "waiting for kind Foo samplecontroller.k8s.io/v1alpha1: not served")
	})
	installCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := manifest.InstallCRD(installCtx, e.Config, plain); err != nil {
		t.Fatal(err)
	}

	c, err := client.New(e.Config, client.Options{Scheme: foo.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	foos, err := client.NewResource[*v1alpha1.Foo](c, v1alpha1.Resource)
	if err != nil {
		t.Fatal(err)
	}
	example, err := manifest.Decode[*v1alpha1.Foo](foo.Scheme(), foo.ExampleFooYAML)
	if err != nil {
		t.Fatal(err)
	}
	example.Namespace = "default"
	if _, err := foos.Create(ctx, example); err != nil {
		t.Fatal(err)
	}
	fooWatch := dynamic.NewForConfigOrDie(e.Config).Resource(v1alpha1.Resource).Namespace("default")
	availCtx, availCancel := context.WithTimeout(ctx, 90*time.Second) // pods need kube-controller-manager and podsim
	defer availCancel()
	_, err = ctxwait.Object(availCtx, fooWatch, "example-foo", func(f *unstructured.Unstructured) bool {
		n, _, _ := unstructured.NestedInt64(f.Object, "status", "availableReplicas")
		return n == 1
	})
	if err != nil {
		t.Fatalf("example-foo not reporting 1 available replica within 90s: %v", err)
	}
	kc := kubernetes.NewForConfigOrDie(e.Config)
	d, err := kc.AppsV1().Deployments("default").Get(ctx, "example-foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 1 || ptr.Deref(d.Spec.Replicas, 0) != 1 {
		t.Errorf("Deployment replicas %d available %d, want 1 and 1", ptr.Deref(d.Spec.Replicas, 0), d.Status.AvailableReplicas)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-logs.closed:
	case <-time.After(60 * time.Second):
		t.Fatal("foo-controller still running 60s after SIGTERM")
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Errorf("foo-controller exited with status %d after SIGTERM, want 0", exitErr.ExitCode())
	} else if err != nil {
		t.Errorf("foo-controller: %v", err)
	}
	if !strings.Contains(logs.String(), "Stopped foo-controller") {
		t.Error("no stop log line")
	}
}

func TestFooController_HelpExitsZeroAndNamesSampleControllersFlags(t *testing.T) {
	var stdout strings.Builder
	if code := cli.Run(t.Context(), command(), []string{"--help"}, &stdout, io.Discard); code != 0 {
		t.Errorf("--help exited %d, want 0", code)
	}
	for _, flag := range []string{"--kubeconfig", "--master", "--namespace", "--workers"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("--help output lacks %q:\n%s", flag, stdout.String())
		}
	}
	if code := cli.Run(t.Context(), command(), []string{"extra"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("an unexpected argument exited %d, want 2", code)
	}
	// The Foo controller waits for its CRD unless told not to.
	if f := command().Flags().Lookup("wait-for-kinds"); f == nil || f.DefValue != "true" {
		t.Errorf("--wait-for-kinds is %v, want a flag that defaults to true", f)
	}
	// sample-controller's single-dash spelling reaches the flag: the file
	// it names is what is missing.
	var stderr strings.Builder
	if code := cli.Run(t.Context(), command(), []string{"-kubeconfig", "/nonexistent/kubeconfig"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), `--kubeconfig "/nonexistent/kubeconfig"`) {
		t.Errorf("-kubeconfig /nonexistent/kubeconfig exited %d, stderr %q; want 2 naming the file", code, stderr.String())
	}
}
