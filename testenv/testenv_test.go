package testenv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnvVar) != "" {
		runChild()
		return
	}
	goleak.VerifyTestMain(m, testenv.GoleakIgnores()...)
}

func clientset(t *testing.T, e *testenv.Env) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestEnv_BecomesReadyAndServesConfigMaps(t *testing.T) {
	e := testenv.StartT(t, testenv.Options{})
	t.Logf("control plane ready in %v", e.StartupDuration)
	// A bound that catches a hang, not a timing: `go test ./...` starts
	// many control planes at once on two cores, and one took 16 s then
	// (3–4 s alone). Start times are measured by benchmarks, not tests.
	if e.StartupDuration > 2*time.Minute {
		t.Errorf("control plane took %v to become ready, want at most 2m", e.StartupDuration)
	}
	ctx := testCtx(t, time.Minute)
	cs := clientset(t, e)
	cms := cs.CoreV1().ConfigMaps("default")

	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "first", Labels: map[string]string{"app": "kloop"}},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := cms.Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["k"] != "v" || got.UID != created.UID {
		t.Fatalf("get returned %+v, want the created object", got)
	}
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=kloop"})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "first" {
		t.Fatalf("list by label = %d items, want exactly [first]", len(list.Items))
	}

	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "second"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create second: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Added || !ok || cm.Name != "second" {
			t.Fatalf("watch delivered %v %T, want Added ConfigMap second", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("timed out waiting for the watch to deliver the second ConfigMap")
	}
}

func TestEnv_DeploymentGetsPodsAndNamespaceIsFinalized(t *testing.T) {
	// The extra flags reach kube-controller-manager, and it accepts them
	// (an unknown flag would stop it, and no Pod would come).
	flags := []string{"--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10"}
	e := testenv.StartT(t, testenv.Options{ControllerManager: true, ControllerManagerFlags: flags})
	ctx := testCtx(t, 3*time.Minute)
	cs := clientset(t, e)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	_, err := cs.AppsV1().Deployments("apps").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The controllers work asynchronously; the pods come after the
	// ReplicaSet, so every change that matters shows in a watch of them.
	await.Watched(t, "the deployment's one ReplicaSet and two Pods", cs.CoreV1().Pods("apps"), metav1.ListOptions{LabelSelector: "app=web"}, func(ctx context.Context) (bool, error) {
		rs, err := cs.AppsV1().ReplicaSets("apps").List(ctx, metav1.ListOptions{})
		if err != nil || len(rs.Items) != 1 {
			return false, err
		}
		pods, err := cs.CoreV1().Pods("apps").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods.Items) == 2, err
	})
	// Read once it has made Pods: right after its start the process may
	// still be inside execve, when /proc/PID/cmdline reads empty.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", e.PIDs()["kube-controller-manager"]))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(cmdline), "\x00")
	for _, f := range flags {
		if !slices.Contains(args, f) {
			t.Errorf("kube-controller-manager runs with %q, want %s among its arguments", args, f)
		}
	}

	if err := cs.CoreV1().Namespaces().Delete(ctx, "apps", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await.Watched(t, "namespace apps to be finalized and removed", cs.CoreV1().Namespaces(), metav1.ListOptions{FieldSelector: "metadata.name=apps"}, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "apps", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func TestEnv_RestartAPIServerEndsWatchesAndKeepsData(t *testing.T) {
	e := testenv.StartT(t, testenv.Options{})
	ctx := testCtx(t, 2*time.Minute)
	cs := clientset(t, e)
	cms := cs.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	oldPID := e.PIDs()["kube-apiserver"]
	if err := e.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if newPID := e.PIDs()["kube-apiserver"]; newPID == oldPID {
		t.Fatalf("kube-apiserver pid unchanged (%d) after restart", oldPID)
	}
	// The old watch must end: its channel closes, possibly after an error event.
	func() {
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok || ev.Type == watch.Error {
					return
				}
			case <-ctx.Done():
				t.Fatal("watch opened before the restart neither closed nor reported an error")
			}
		}
	}()
	got, err := cms.Get(ctx, "kept", metav1.GetOptions{})
	if err != nil || got.Name != "kept" {
		t.Fatalf("data after restart: %v", err)
	}
	// A fresh API server's watch cache starts at the current revision, so the
	// new watch resumes from a list taken now, not from the object's older rv.
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w2, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("new watch after restart: %v", err)
	}
	defer w2.Stop()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w2.ResultChan():
		if ev.Type != watch.Added {
			t.Fatalf("new watch delivered %v, want Added", ev.Type)
		}
	case <-ctx.Done():
		t.Fatal("new watch after restart delivered nothing")
	}
}

func TestEnv_CompactMakesOlderResourceVersionsGone(t *testing.T) {
	e := testenv.StartT(t, testenv.Options{})
	ctx := testCtx(t, 2*time.Minute)
	cms := clientset(t, e).CoreV1().ConfigMaps("default")
	old, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later-" + strconv.Itoa(i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := e.CompactAndRestart(ctx)
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	oldRV, _ := strconv.ParseInt(old.ResourceVersion, 10, 64)
	if rev <= oldRV {
		t.Fatalf("compacted at revision %d, want beyond %d", rev, oldRV)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: old.ResourceVersion})
	if err != nil {
		if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Fatalf("watch from compacted rv failed with %v, want 410 Gone", err)
		}
		return
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch from a compacted resourceVersion closed without a 410 error")
		}
		status, isStatus := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !isStatus || status.Code != 410 {
			t.Fatalf("watch from a compacted resourceVersion delivered %v %+v, want an Error event with code 410", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("watch from a compacted resourceVersion delivered nothing")
	}
}

func TestEnv_UserWithoutRBACIsForbiddenToList(t *testing.T) {
	e := testenv.StartT(t, testenv.Options{})
	ctx := testCtx(t, time.Minute)
	cfg, err := e.UserConfig("nobody", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list as a user without RBAC returned %v, want 403 Forbidden", err)
	}
	if !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("forbidden error %q does not name the user", err)
	}
}

// skipShort skips a test that starts a control plane through Start rather
// than StartT, which skips by itself under -short.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (not started with -short)")
	}
}

// TestEnv_StartsNothingUnderShort runs in both tiers: in the short one it
// checks that Start refuses and that no control-plane binary ran, even with
// binaries in place; in the full one it runs itself again with -short.
func TestEnv_StartsNothingUnderShort(t *testing.T) {
	if !testing.Short() {
		cmd := exec.CommandContext(testCtx(t, 2*time.Minute), os.Args[0], "-test.short", "-test.v", "-test.run=^TestEnv_StartsNothingUnderShort$")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestEnv_StartsNothingUnderShort") {
			t.Fatalf("the test under -short: %v\n%s", err, out)
		}
		return
	}
	// Stand-ins for the binaries that leave a mark when they run.
	dir := t.TempDir()
	names := []string{"etcd", "kube-apiserver", "kube-controller-manager"}
	for _, name := range names {
		script := fmt.Sprintf("#!/bin/sh\ntouch %q\n", filepath.Join(dir, name+".ran"))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := testenv.Options{BinDir: dir, ControllerManager: true}
	if e, err := testenv.Start(t.Context(), opts); !errors.Is(err, testenv.ErrShort) {
		if e != nil {
			e.Stop()
		}
		t.Errorf("Start under -short returned %v, want ErrShort", err)
	}
	reached := false
	t.Run("StartT", func(t *testing.T) {
		testenv.StartT(t, opts)
		reached = true
	})
	var shared testenv.Shared
	shared.Options = opts
	t.Run("Shared", func(t *testing.T) {
		shared.Env(t)
		reached = true
	})
	if reached {
		t.Error("StartT or Shared.Env returned under -short instead of skipping the test")
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name+".ran")); !os.IsNotExist(err) {
			t.Errorf("%s ran under -short (stat of its mark: %v)", name, err)
		}
	}
}

func TestEnv_MissingBinariesSayWhatToRun(t *testing.T) {
	_, err := testenv.Start(t.Context(), testenv.Options{BinDir: t.TempDir()})
	if !errors.Is(err, testenv.ErrBinaryMissing) || !strings.Contains(err.Error(), "kloop controlplane install") || !strings.Contains(err.Error(), "make controlplane") {
		t.Fatalf("start with an empty bin dir returned %v, want ErrBinaryMissing telling to run kloop controlplane install (or make controlplane)", err)
	}
}

func TestEnv_PortInUseIsNamed(t *testing.T) {
	e := testenv.StartT(t, testenv.Options{})
	_, err := testenv.Start(t.Context(), testenv.Options{APIServerPort: e.APIServerPort})
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(e.APIServerPort)) || !strings.Contains(err.Error(), "not free") {
		t.Fatalf("start on a taken port returned %v, want an error naming port %d as not free", err, e.APIServerPort)
	}
}

func TestEnv_StopLeavesNoProcess(t *testing.T) {
	skipShort(t)
	e, err := testenv.Start(t.Context(), testenv.Options{ControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	pids := e.PIDs()
	if len(pids) != 3 {
		t.Fatalf("PIDs() = %v, want etcd, kube-apiserver and kube-controller-manager", pids)
	}
	dir := e.Dir
	e.Stop()
	for name, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still running after Stop", name, pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still exists after Stop (stat err %v)", dir, err)
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state letter follows the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

const childEnvVar = "KLOOP_TESTENV_CHILD"

// runChild is the body of the re-executed test binary: start an Env, print
// the pids, and block until killed.
func runChild() {
	e, err := testenv.Start(context.Background(), testenv.Options{ControllerManager: true})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Printf("DIR %s\n", e.Dir)
	for name, pid := range e.PIDs() {
		fmt.Printf("PID %s %d\n", name, pid)
	}
	fmt.Println("READY")
	select {}
}

func TestEnv_ChildrenDieWhenTheirParentIsKilled(t *testing.T) {
	skipShort(t) // the child starts a control plane, and does not run with -short
	ctx := testCtx(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnvVar+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "DIR" {
			dir := f[1]
			t.Cleanup(func() { os.RemoveAll(dir) })
		}
		if len(f) == 3 && f[0] == "PID" {
			pids[f[1]], _ = strconv.Atoi(f[2])
		}
		if len(f) > 0 && (f[0] == "READY" || f[0] == "ERROR") {
			if f[0] == "ERROR" {
				t.Fatalf("child failed to start its env: %s", sc.Text())
			}
			break
		}
	}
	if len(pids) != 3 {
		t.Fatalf("child reported pids %v, want three", pids)
	}
	// The parent dies without any chance to clean up.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, pid := range pids {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL) // do not leave it behind
			}
		}
	})
	// The kernel delivers the parent-death signal asynchronously.
	for name, pid := range pids {
		testwait.Exited(t, fmt.Sprintf("%s (pid %d) to die with its parent", name, pid), pid)
	}
}

// pinnedKubernetesVersion is the k8s.io/kubernetes version that
// tools/controlplane/go.mod builds the control plane from.
func pinnedKubernetesVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tools", "controlplane", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "k8s.io/kubernetes" {
			return f[1]
		}
	}
	t.Fatal("tools/controlplane/go.mod requires no k8s.io/kubernetes")
	return ""
}

func TestKubernetesVersion_IsThePinnedOne(t *testing.T) {
	if want := pinnedKubernetesVersion(t); testenv.KubernetesVersion != want {
		t.Errorf("testenv.KubernetesVersion is %q, tools/controlplane/go.mod builds %q: change the constant with the pin", testenv.KubernetesVersion, want)
	}
}

func TestEnv_ServerVersionIsTheOneBuilt(t *testing.T) {
	want := pinnedKubernetesVersion(t)
	e := testenv.StartT(t, testenv.Options{})
	// kubectl version parses gitVersion as semver: a control plane built
	// without the link-time version reports v0.0.0-master+$Format:%H$.
	v, err := clientset(t, e).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != want {
		t.Errorf("the API server reports gitVersion %q, want %q (tools/controlplane/go.mod's k8s.io/kubernetes; rebuild with make controlplane)", v.GitVersion, want)
	}
	if wantMinor := strings.Split(want, ".")[1]; v.Major != strings.TrimPrefix(strings.Split(want, ".")[0], "v") || v.Minor != wantMinor {
		t.Errorf("the API server reports major %q minor %q, want them from %s", v.Major, v.Minor, want)
	}
	if v.GitTreeState != "clean" {
		t.Errorf("the API server reports gitTreeState %q, want clean", v.GitTreeState)
	}
}
