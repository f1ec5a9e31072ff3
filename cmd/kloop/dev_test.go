package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

func TestParseFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]bool
		wantErr string // in the error; "" for none
	}{
		{"", nil, ""},
		{"A=true,B=false", map[string]bool{"A": true, "B": false}, ""},
		{" A = true , ,B=0,", map[string]bool{"A": true, "B": false}, ""},
		{"A=true,B", nil, `the entry "B" is not Name=true or Name=false`},
		{"A=yes", nil, `the entry "A=yes" is not`},
		{"=true", nil, `the entry "=true" is not`},
		{"My Gate=true", nil, `the entry "My Gate=true" is not`},
		{"A=true,A=false", nil, "the gate A is set twice"},
	} {
		got, err := parseFeatureGates(tc.in)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--feature-gates") {
				t.Errorf("parseFeatureGates(%q) = %v, %v; want an error about --feature-gates containing %q", tc.in, got, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("parseFeatureGates(%q): %v", tc.in, err)
		case len(got) != len(tc.want):
			t.Errorf("parseFeatureGates(%q) = %v, want %v", tc.in, got, tc.want)
		default:
			for k, v := range tc.want {
				if on, ok := got[k]; !ok || on != v {
					t.Errorf("parseFeatureGates(%q) = %v, want %v", tc.in, got, tc.want)
				}
			}
		}
	}
}

func TestDev_BadKnobsExit2NamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--feature-gates", "ShardedListAndWatch=true,Foo"}, `--feature-gates "ShardedListAndWatch=true,Foo": the entry "Foo" is not Name=true or Name=false`},
		{[]string{"--controllers", "job-controller,Job Controller"}, `--controllers "Job Controller": not a kube-controller-manager controller name`},
		{[]string{"--controllers", "job-controller", "--no-controller-manager"}, "--no-controller-manager starts none"},
		{[]string{"bin/my-controller"}, `takes no argument "bin/my-controller": put the command to run after --`},
		{[]string{"--apply", "no/such/manifests"}, `--apply "no/such/manifests": a YAML file or a directory of them`},
	} {
		var out, errb strings.Builder
		// A bin dir that does not exist: the flags are checked before
		// anything starts.
		args := append([]string{"dev", "--bin-dir", t.TempDir() + "/none"}, tc.args...)
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("kloop %s = %d, stderr %q; want 2 and %q", strings.Join(args, " "), code, errb.String(), tc.want)
		}
	}
}

// TestDev_KnobsRunAJobThroughPodsimWithTheGatesGiven starts kloop dev
// with the job-controller, podsim and a feature gate, and checks each
// through the printed kubeconfig: a Job completes (its pods bound, run and
// finished by podsim, counted by the Job controller) and the API server
// reports the gate as set.
func TestDev_KnobsRunAJobThroughPodsimWithTheGatesGiven(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// ShardedListAndWatch is on by default in testenv; the flag turns it off.
	cmd := command(ctx, "dev", "--controllers", "job-controller", "--podsim", "--feature-gates", "ShardedListAndWatch=false")
	lines, stderr := startLines(t, cmd)
	var kubeconfig string
	podsimLine := false
	for kubeconfig == "" || !podsimLine {
		l, ok := <-lines
		if !ok {
			t.Fatalf("kloop dev's output ended before its export and podsim lines; stderr:\n%s", stderr.String())
		}
		if p, ok := strings.CutPrefix(l, "export KUBECONFIG="); ok {
			kubeconfig = p
		}
		podsimLine = podsimLine || strings.HasPrefix(l, "# podsim runs node kloop-node")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)

	metrics, err := kc.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := `kubernetes_feature_enabled{name="ShardedListAndWatch",stage="ALPHA"} 0`; !strings.Contains(string(metrics), want) {
		t.Errorf("the API server's /metrics lack %s: --feature-gates not passed on", want)
	}

	ns := testenv.NewNamespace(t, kc, "dev-job")
	jobs := kc.BatchV1().Jobs(ns)
	_, err = jobs.Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	await.Object(t, "Job once Complete", jobs, "once", func(j *batchv1.Job) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kloop dev after SIGINT: %v, want exit code 0; stderr:\n%s", err, stderr.String())
	}
}

// TestDev_AppliesManifestsThenRunsTheCommandAndExitsWithItsStatus runs
// kloop dev with the Foo CRD and an example Foo to apply and a command
// after --, which finds the kubeconfig in $KUBECONFIG and exits 7: kloop
// dev stops the control plane and exits 7 too.
func TestDev_AppliesManifestsThenRunsTheCommandAndExitsWithItsStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	script := `test -s "$KUBECONFIG" || exit 3; exit 7`
	cmd := command(ctx, "dev", "--no-controller-manager", "--apply", "../../samples/foo/crd", "--apply", "../../samples/foo/artifacts/examples/example-foo.yaml", "--", "sh", "-c", script)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("kloop dev exited with %v, want status 7 (the command's); stdout:\n%s", err, out)
	}
	for _, want := range []string{
		"# installed CustomResourceDefinition foos.samplecontroller.k8s.io",
		"# applied Foo default/example-foo",
		"# running sh -c " + script + " with KUBECONFIG=",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kloop dev's output does not say %q:\n%s", want, out)
		}
	}
}

// TestDev_KubectlVersionPrintsThePinnedServerVersion runs `kubectl version`
// against kloop dev's control plane, as a user does: it parses the
// server's gitVersion as a release version, so a control plane built
// without version information fails it.
func TestDev_KubectlVersionPrintsThePinnedServerVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("needs kubectl on PATH, as the CronJob sample's kubectl test does")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	script := `kubectl version --kubeconfig "$KUBECONFIG" -o json > "$OUT"`
	out := filepath.Join(t.TempDir(), "version.json")
	cmd := command(ctx, "dev", "--no-controller-manager", "--", "sh", "-c", script)
	cmd.Env = append(cmd.Environ(), "OUT="+out)
	if stdout, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kloop dev -- kubectl version: %v\n%s", err, stdout)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, data)
	}
	if v.ServerVersion.GitVersion != testenv.KubernetesVersion {
		t.Errorf("kubectl version says the server is %q, want %s:\n%s", v.ServerVersion.GitVersion, testenv.KubernetesVersion, data)
	}
}
