package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/cli"
	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	testenv.DetectMutations()
	// Re-executed by a test: behave as the podwatch command itself.
	reexec.Main(func(args []string) int {
		os.Args = append([]string{"podwatch"}, args...)
		main()
		return 0
	})
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func TestPodwatch_PrintsExampleLinesAndExitsZeroOnSIGTERM(t *testing.T) {
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
	out, logs := reexec.Start(t, "podwatch", cmd)
	exact := func(line string) *regexp.Regexp { return regexp.MustCompile("^" + regexp.QuoteMeta(line) + "$") }

	out.WaitFor(t, "the line for the pod that existed before the start", exact("Sync/Add/Update for Pod before"))

	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("p1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out.WaitFor(t, "the add line", exact("Sync/Add/Update for Pod p1"))
	// An unscheduled pod is deleted at once (no kubelet to wait for).
	if err := kc.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out.WaitFor(t, "the delete line", exact("Pod "+ns+"/p1 does not exist anymore"))

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out.WaitEOF(t)
	logs.WaitEOF(t)
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Errorf("podwatch exited with status %d after SIGTERM, want 0", exitErr.ExitCode())
	} else if err != nil {
		t.Errorf("podwatch: %v", err)
	}

	want := []string{
		"Pod " + ns + "/mypod does not exist anymore", // seeded before the start, as in client-go's example
		"Sync/Add/Update for Pod before",
		"Sync/Add/Update for Pod p1",
		"Pod " + ns + "/p1 does not exist anymore",
	}
	// Deleting a pod first sets its deletionTimestamp (an update), then
	// removes it; the queue may or may not fold that update into the
	// delete, so a repeated sync line for p1 is allowed.
	if got := collapseRepeats(out.All()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant exactly:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l := logs.WaitFor(t, "the stop log", regexp.MustCompile("Stopped podwatch")); l == "" {
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
	var stdout strings.Builder
	if code := cli.Run(t.Context(), command(), []string{"--help"}, &stdout, io.Discard); code != 0 {
		t.Errorf("--help exited %d, want 0", code)
	}
	if !strings.Contains(stdout.String(), "--namespace") {
		t.Errorf("--help output lacks the namespace flag:\n%s", stdout.String())
	}
}
