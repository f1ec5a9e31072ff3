package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kloop-dev/kloop/internal/reexec"
	"github.com/kloop-dev/kloop/testenv"
)

func TestMain(m *testing.M) {
	// Re-executed by a test: behave as the kloop command itself.
	reexec.Main(func(args []string) int { return run(args, os.Stdout, os.Stderr) })
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

// command runs this test binary as `kloop <args>`.
func command(ctx context.Context, args ...string) *exec.Cmd {
	return reexec.Command(ctx, args...)
}

var pidRE = regexp.MustCompile(`pid=(\d+)`)

func TestDev_PrintsKubeconfigServesKubectlAndStopsCleanlyOnSIGINT(t *testing.T) {
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

	var kubeconfig string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "export KUBECONFIG="); ok {
			kubeconfig = rest
			break
		}
	}
	if kubeconfig == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("kloop dev never printed an `export KUBECONFIG=` line")
	}
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
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			return syscall.Kill(pid, 0) != nil, nil
		})
		if err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("child pid %d still running after kloop dev exited", pid)
		}
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
