package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/samples/podwatch"
	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	// Re-executed by a test: behave as the podwatch command itself.
	reexec.Main(func(args []string) int {
		os.Args = append([]string{"podwatch"}, args...)
		main()
		return 0
	})
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

// lineReader collects a stream's lines and lets a test wait for one.
type lineReader struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced on every new line
	eof   bool
}

func readLines(r io.Reader) *lineReader {
	lr := &lineReader{more: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			lr.mu.Lock()
			lr.lines = append(lr.lines, s.Text())
			close(lr.more)
			lr.more = make(chan struct{})
			lr.mu.Unlock()
		}
		lr.mu.Lock()
		lr.eof = true
		close(lr.more)
		lr.mu.Unlock()
	}()
	return lr
}

func (lr *lineReader) all() []string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return append([]string(nil), lr.lines...)
}

// waitFor waits until a line matches re and returns it.
func (lr *lineReader) waitFor(t *testing.T, what string, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		lr.mu.Lock()
		for _, l := range lr.lines {
			if re.MatchString(l) {
				lr.mu.Unlock()
				return l
			}
		}
		more, eof := lr.more, lr.eof
		lr.mu.Unlock()
		if eof {
			t.Fatalf("podwatch's output ended before %s", what)
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no %s within 60s; lines so far:\n%s", what, strings.Join(lr.all(), "\n"))
		}
	}
}

func (lr *lineReader) waitEOF(t *testing.T) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		lr.mu.Lock()
		more, eof := lr.more, lr.eof
		lr.mu.Unlock()
		if eof {
			return
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatal("output still open 60s after the stop")
		}
	}
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func TestPodwatch_PrintsExampleLinesDropsAfterFiveRetriesAndExitsZeroOnSIGTERM(t *testing.T) {
	e := testenv.StartT(t, testenv.Options{})
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	const ns = "podwatch-e2e"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount (no
	// kube-controller-manager runs here to make it).
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("before"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cmd := reexec.Command(context.Background(), "--namespace", ns, "--kubeconfig", e.KubeconfigPath)
	cmd.Env = append(cmd.Env, podwatch.FailSyncEnv+"=flaky")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
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
	out, logs := readLines(stdout), readLines(stderr)
	defer func() {
		if t.Failed() {
			t.Logf("podwatch stderr:\n%s", strings.Join(logs.all(), "\n"))
		}
	}()
	exact := func(line string) *regexp.Regexp { return regexp.MustCompile("^" + regexp.QuoteMeta(line) + "$") }

	out.waitFor(t, "the line for the pod that existed before the start", exact("Sync/Add/Update for Pod before"))

	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("p1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "the add line", exact("Sync/Add/Update for Pod p1"))
	// An unscheduled pod is deleted at once (no kubelet to wait for).
	if err := kc.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "the delete line", exact("Pod "+ns+"/p1 does not exist anymore"))

	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("flaky"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	drop := logs.waitFor(t, "the drop log", regexp.MustCompile(`Dropping pod out of the queue`))
	for _, want := range []string{"pod=" + ns + "/flaky", "injected sync failure", "level=ERROR"} {
		if !strings.Contains(drop, want) {
			t.Errorf("drop log %q lacks %q", drop, want)
		}
	}
	retries := 0
	for _, l := range logs.all() {
		if strings.Contains(l, "will retry") && strings.Contains(l, "key="+ns+"/flaky") {
			retries++
		}
	}
	if retries != 5 {
		t.Errorf("%d retries logged for the failing pod, want 5 before the drop", retries)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out.waitEOF(t)
	logs.waitEOF(t)
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Errorf("podwatch exited with status %d after SIGTERM, want 0", exitErr.ExitCode())
	} else if err != nil {
		t.Errorf("podwatch: %v", err)
	}

	want := []string{
		"Sync/Add/Update for Pod before",
		"Sync/Add/Update for Pod p1",
		"Pod " + ns + "/p1 does not exist anymore",
	}
	// Deleting a pod first sets its deletionTimestamp (an update), then
	// removes it; the queue may or may not fold that update into the
	// delete, so a repeated sync line for p1 is allowed.
	if got := collapseRepeats(out.all()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l := logs.waitFor(t, "the stop log", regexp.MustCompile("Stopping Pod controller")); l == "" {
		t.Error("no stop log")
	}
}

// collapseRepeats drops lines equal to the line before them.
func collapseRepeats(lines []string) []string {
	var out []string
	for i, l := range lines {
		if i == 0 || l != lines[i-1] {
			out = append(out, l)
		}
	}
	return out
}

func TestPodwatch_HelpExitsZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr strings.Builder
	if code := run(ctx, []string{"--help"}, io.Discard, &stderr); code != 0 {
		t.Errorf("--help exited %d, want 0", code)
	}
	if !strings.Contains(stderr.String(), "-namespace") {
		t.Errorf("--help output lacks the namespace flag:\n%s", stderr.String())
	}
}
