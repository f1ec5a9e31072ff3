package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// holdStopEnv, set for a re-executed kloop dev, makes it hold its graceful
// stop until a second signal ends the process.
const holdStopEnv = "KLOOP_TEST_HOLD_STOP"

func TestMain(m *testing.M) {
	testenv.DetectMutations()
	// Re-executed by a test: behave as the kloop command itself.
	reexec.Main(func(args []string) int {
		if os.Getenv(holdStopEnv) != "" {
			holdStop = func() { select {} }
		}
		return run(args, os.Stdout, os.Stderr)
	})
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

// command runs this test binary as `kloop <args>`.
func command(ctx context.Context, args ...string) *exec.Cmd {
	return reexec.Command(ctx, args...)
}

// startLines starts cmd with its stdout lines on the returned channel
// (closed at its end) and its stderr in the buffer; the process is killed
// and reaped when the test ends.
func startLines(t *testing.T, cmd *exec.Cmd) (<-chan string, *await.Buffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &await.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, stderr
}

var pidRE = regexp.MustCompile(`pid=(\d+)`)

func TestDev_PrintsKubeconfigServesKubectlAndStopsCleanlyOnSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	cmd := command(ctx, "dev", "--data-dir", dataDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderrW.Close()
	pids := make(chan int, 16)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderrR)
		for sc.Scan() {
			t.Log("kloop dev: " + sc.Text())
			if m := pidRE.FindStringSubmatch(sc.Text()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				pids <- pid
			}
		}
	}()

	kubeconfig := exportedKubeconfig(t, cmd, stdout, nil)
	if !strings.HasPrefix(kubeconfig, dataDir) {
		t.Errorf("kubeconfig %s is not inside --data-dir %s", kubeconfig, dataDir)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load printed kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list namespaces through the printed kubeconfig: %v", err)
	}
	found := false
	for _, ns := range nss.Items {
		found = found || ns.Name == "default"
	}
	if !found {
		t.Fatalf("namespaces %v lack default", nss.Items)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kloop dev after SIGINT: %v, want exit code 0", err)
	}
	<-logDone
	close(pids)
	n := 0
	for pid := range pids {
		n++
		testwait.Exited(t, fmt.Sprintf("child pid %d to end after kloop dev exited", pid), pid)
	}
	if n != 3 {
		t.Errorf("kloop dev logged %d child pids, want 3 (etcd, kube-apiserver, kube-controller-manager)", n)
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Errorf("--data-dir lost the kubeconfig after exit: %v", err)
	}
}

func TestRun_UnknownCommandExits2(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"bogus"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "bogus"`) {
		t.Fatalf("run(bogus) = %d, stderr %q; want 2 and a message naming the command", code, errb.String())
	}
}

func TestDemo_ExampleFooBecomesAvailableThroughPodsimAndSIGINTExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	cmd := command(context.Background(), "demo")
	lines, stderr := startLines(t, cmd)

	// What the demo must show, in any order, before the Foo is available.
	want := map[string]*regexp.Regexp{
		"the applied example":       regexp.MustCompile(`^# applied example-foo\.yaml: Foo default/example-foo`),
		"the owned Deployment":      regexp.MustCompile(`^deployment/example-foo +replicas=1 .*owner=Foo/example-foo$`),
		"a pod Running on podsim":   regexp.MustCompile(`^pod/example-foo-\S+ +Running,Ready node=kloop-node ip=10\.244\.`),
		"the Synced event":          regexp.MustCompile(`^event Foo/example-foo Synced +Normal: Foo synced successfully$`),
		"the Foo with 1 available":  regexp.MustCompile(`^foo/example-foo +deploymentName=example-foo spec\.replicas=1 status\.availableReplicas=1$`),
		"the kubeconfig to export":  regexp.MustCompile(`^export KUBECONFIG=\S+`),
		"the CRD installed message": regexp.MustCompile(`^# installed CRD foos\.samplecontroller\.k8s\.io`),
		"the debug page's URL":      pageLine,
	}
	var seen []string
	var page string
	deadline := time.After(3 * time.Minute)
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("kloop demo's output ended; missing %v; output:\n%s\nstderr:\n%s", keys(want), strings.Join(seen, "\n"), stderr.String())
			}
			seen = append(seen, l)
			if m := pageLine.FindStringSubmatch(l); m != nil {
				page = m[1]
			}
			for what, re := range want {
				if re.MatchString(l) {
					delete(want, what)
				}
			}
		case <-deadline:
			t.Fatalf("within 3 minutes kloop demo did not print %v; output:\n%s", keys(want), strings.Join(seen, "\n"))
		}
	}

	// The page it printed shows the Foo controller and its example Foo.
	resp, err := http.Get(page + "api/v1/snapshot")
	if err != nil {
		t.Fatalf("GET the debug page's snapshot: %v", err)
	}
	var snap struct {
		Controllers []struct {
			Name       string
			Reconciles struct{ Success int }
		}
		Informers []struct{ Resource string }
	}
	err = json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	if err != nil || len(snap.Controllers) != 1 || snap.Controllers[0].Name != "foo-controller" || snap.Controllers[0].Reconciles.Success == 0 || len(snap.Informers) != 2 {
		t.Errorf("the debug page's snapshot: %+v, %v; want foo-controller with successful reconciles and its 2 informers", snap, err)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kloop demo after SIGINT: %v, want exit code 0; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "control plane stopped") {
		t.Errorf("no stop of the control plane in stderr:\n%s", stderr.String())
	}
}

// pageLine is the demo's line with the URL of the debug page.
var pageLine = regexp.MustCompile(`^# the Foo controller's live page: (http://127\.0\.0\.1:\d+/debug/) `)

func keys(m map[string]*regexp.Regexp) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestDemo_AFailureToApplyTheExampleExits1AndStopsTheControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// Not a valid namespace name: the namespace cannot be created.
	cmd := command(ctx, "demo", "--namespace", "Not_Valid")
	stderr := &await.Buffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Errorf("kloop demo with an invalid namespace: %v, want exit status 1; stderr:\n%s", err, stderr)
	}
	if !strings.Contains(stderr.String(), `kloop demo: create namespace Not_Valid: `) {
		t.Errorf("stderr does not say what failed:\n%s", stderr)
	}
	pids := pidRE.FindAllStringSubmatch(stderr.String(), -1)
	if len(pids) != 3 {
		t.Errorf("kloop demo logged %d child pids, want 3 (etcd, kube-apiserver, kube-controller-manager)", len(pids))
	}
	for _, m := range pids {
		pid, _ := strconv.Atoi(m[1])
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("child pid %d still running after kloop demo exited", pid)
		}
	}
}

func TestDev_ASecondSIGINTKillsTheControlPlaneRemovesItsTemporaryDirectoryAndExits1(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := command(ctx, "dev")
	cmd.Env = append(cmd.Env, holdStopEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &await.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kubeconfig := exportedKubeconfig(t, cmd, stdout, stderr)
	dir := filepath.Dir(kubeconfig)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The second once the first is being handled (two pending SIGINTs are
	// one), while the graceful stop is under way: it is held (holdStopEnv)
	// until the second ends the process.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr)
		}
	})
	await.Until(t, "kloop dev to start stopping after SIGINT", stderr.Changed, func() bool {
		return strings.Contains(stderr.String(), "stopping control plane")
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if strings.Contains(stderr.String(), "control plane stopped") {
		t.Error("the control plane stopped gracefully although its stop was held for the second SIGINT")
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Errorf("kloop dev after two SIGINTs: %v, want exit status 1; stderr:\n%s", err, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		_ = os.RemoveAll(dir)
		t.Errorf("temporary directory %s left behind (stat: %v)", dir, err)
	}
	pids := pidRE.FindAllStringSubmatch(stderr.String(), -1)
	if len(pids) != 3 {
		t.Errorf("kloop dev logged %d child pids, want 3 (etcd, kube-apiserver, kube-controller-manager)", len(pids))
	}
	for _, m := range pids {
		pid, _ := strconv.Atoi(m[1])
		testwait.Exited(t, fmt.Sprintf("child pid %d to end after kloop dev exited", pid), pid)
	}
}

// exportedKubeconfig reads cmd's stdout up to its `export KUBECONFIG=` line
// and returns the path; if the output ends first it kills cmd and fails the
// test, showing stderr's content if stderr is not nil.
func exportedKubeconfig(t *testing.T, cmd *exec.Cmd, stdout io.Reader, stderr fmt.Stringer) string {
	t.Helper()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if path, ok := strings.CutPrefix(sc.Text(), "export KUBECONFIG="); ok {
			return path
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if stderr != nil {
		t.Fatalf("kloop dev never printed an `export KUBECONFIG=` line; stderr:\n%s", stderr)
	}
	t.Fatal("kloop dev never printed an `export KUBECONFIG=` line")
	return ""
}
