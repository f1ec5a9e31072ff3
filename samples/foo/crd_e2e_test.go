package foo_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCRDDirectory_AppliesWithKubectl applies samples/foo/crd/ as
// docs/local.md says to install it: kubectl apply -f reads every .yaml file of
// the directory, so the kustomize file there must not be one.
func TestCRDDirectory_AppliesWithKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("needs kubectl on PATH")
	}
	env := controlPlane.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	// Server-side dry run: the API server validates the CRD but keeps
	// nothing, so the package's other tests see no change.
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", env.KubeconfigPath, "apply", "--dry-run=server", "-f", "crd/").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server -f crd/: %v\n%s", err, out)
	}
	if want := "customresourcedefinition.apiextensions.k8s.io/foos.samplecontroller.k8s.io"; !strings.Contains(string(out), want) {
		t.Errorf("kubectl apply --dry-run=server -f crd/ printed %q, want %s in it", out, want)
	}
}
