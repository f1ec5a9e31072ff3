package main

import (
	"bytes"
	"context"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/cpbin"
	"github.com/kloop-dev/kloop/testenv"
)

// initArgs are kloop init's flags for a valid project, with changes.
func initArgs(dir string, change map[string]string) []string {
	flags := map[string]string{"--module": "example.com/guestbook", "--group": "webapp.example.com", "--kind": "Guestbook", "--version": "v1"}
	for k, v := range change {
		flags[k] = v
	}
	args := []string{"init", dir, "--no-generate"}
	for _, k := range []string{"--module", "--group", "--kind", "--version"} {
		args = append(args, k+"="+flags[k])
	}
	return args
}

// listFiles returns the paths under dir, relative to it.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

func TestInit_RefusesBadInputSayingWhatToChangeAndWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change map[string]string
		exists bool     // an existing file in the directory
		want   []string // in the error
	}{
		{"non-empty directory", nil, true, []string{"is not empty", "give an empty or new directory"}},
		{"module path with a space", map[string]string{"--module": "example.com/my guestbook"}, false, []string{"--module", "a Go module path", `"my guestbook"`}},
		{"module path without a domain", map[string]string{"--module": "guestbook"}, false, []string{"--module", "not a lower-case domain name"}},
		{"module path with an empty element", map[string]string{"--module": "example.com//guestbook"}, false, []string{"--module", "empty element"}},
		{"project name not a DNS label", map[string]string{"--module": "example.com/Guest_Book"}, false, []string{"--module", "DNS label"}},
		{"group without a dot", map[string]string{"--group": "webapp"}, false, []string{"--group", "DNS subdomain with at least one dot"}},
		{"group with capitals", map[string]string{"--group": "WebApp.example.com"}, false, []string{"--group", "DNS subdomain"}},
		{"group of Kubernetes", map[string]string{"--group": "apps.k8s.io"}, false, []string{"--group", "reserved for Kubernetes"}},
		{"kind in lower case", map[string]string{"--kind": "guestbook"}, false, []string{"--kind", "CamelCase"}},
		{"kind with a dash", map[string]string{"--kind": "Guest-Book"}, false, []string{"--kind", "CamelCase"}},
		{"kind the API package declares", map[string]string{"--kind": "Resource"}, false, []string{"--kind", "declares Resource itself"}},
		{"version not an API version", map[string]string{"--version": "1.0"}, false, []string{"--version", "v1, v2, v1alpha1"}},
		{"missing kind", map[string]string{"--kind": ""}, false, []string{"--module, --group and --kind are required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "project")
			if tc.exists {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := listFiles(t, filepath.Dir(dir))
			var stdout, stderr bytes.Buffer
			code := run(initArgs(dir, tc.change), &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit code %d, want 2 (bad input); stderr:\n%s", code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q does not say %q", stderr.String(), w)
				}
			}
			if after := listFiles(t, filepath.Dir(dir)); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("kloop init wrote files on bad input: before %v, after %v", before, after)
			}
		})
	}
}

func TestInit_RendersGofmtedGoAndNamesFromTheInput(t *testing.T) {
	src, err := findCheckout("")
	if err != nil {
		t.Fatal(err)
	}
	f := &initFlags{module: "example.com/acme/policy-engine/v2", group: "policy.acme.io", kind: "Policy", version: "v1beta1"}
	p, err := f.newProject(filepath.Join(t.TempDir(), "new"), src)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "policy-engine" || p.Plural != "policies" {
		t.Errorf("name %q plural %q, want policy-engine and policies", p.Name, p.Plural)
	}
	files, err := p.render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "Makefile", "api/v1beta1/types.go", "cmd/policy-engine/main.go", "internal/controller/controller.go",
		"internal/controller/e2e_test.go", "config/samples/v1beta1_policy.yaml", "deploy/kustomization.yaml", ".gitignore"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no %s among the files", want)
		}
	}
	for name, data := range files {
		if filepath.Ext(name) != ".go" {
			continue
		}
		if formatted, err := format.Source(data); err != nil || !bytes.Equal(formatted, data) {
			t.Errorf("%s is not gofmt'ed (%v)", name, err)
		}
	}
	if gomod := string(files["go.mod"]); !strings.Contains(gomod, "replace github.com/kloop-dev/kloop => "+src.Dir) {
		t.Errorf("go.mod does not replace kloop with the checkout %s:\n%s", src.Dir, gomod)
	}
	if !strings.Contains(string(files["api/v1beta1/types.go"]), "+kubebuilder:resource:path=policies,scope=Namespaced") {
		t.Error("types.go does not name the resource policies in its marker")
	}
}

// webhookFiles are the files only --webhooks writes.
var webhookFiles = []string{"internal/controller/webhook.go", "internal/controller/webhook_test.go",
	"deploy/webhook/kustomization.yaml", "deploy/webhook/service.yaml", "deploy/webhook/bindings.yaml"}

func TestInit_WebhooksAddTheirFilesAndNothingElseDoesWithout(t *testing.T) {
	src, err := findCheckout("")
	if err != nil {
		t.Fatal(err)
	}
	for _, webhooks := range []bool{false, true} {
		forms := ""
		if webhooks {
			forms = webhooksBoth
		}
		f := &initFlags{module: "example.com/guestbook", group: "webapp.example.com", kind: "Guestbook", version: "v1", webhooks: forms}
		p, err := f.newProject(filepath.Join(t.TempDir(), "new"), src)
		if err != nil {
			t.Fatal(err)
		}
		files, err := p.render()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range webhookFiles {
			if _, ok := files[name]; ok != webhooks {
				t.Errorf("--webhooks=%v: %s written %v", webhooks, name, ok)
			}
		}
		for name, data := range files {
			if strings.Contains(strings.ToLower(string(data)), "webhook") != webhooks && (name == "internal/controller/controller.go" || name == "Makefile") {
				t.Errorf("--webhooks=%v: %s mentions webhooks %v", webhooks, name, !webhooks)
			}
			if len(bytes.TrimSpace(data)) == 0 {
				t.Errorf("--webhooks=%v: %s is empty", webhooks, name)
			}
		}
		if !webhooks {
			continue
		}
		code := string(files["internal/controller/webhook.go"])
		for _, marker := range []string{"path=/mutate-webapp-example-com-v1-guestbook,mutating=true", "path=/validate-webapp-example-com-v1-guestbook,mutating=false",
			"groups=webapp.example.com,resources=guestbooks"} {
			if !strings.Contains(code, marker) {
				t.Errorf("webhook.go's markers do not say %q:\n%s", marker, code)
			}
		}
		if mk := string(files["Makefile"]); !strings.Contains(mk, "--webhook-local") || !strings.Contains(mk, "output:webhook:artifacts:config=deploy/webhook") {
			t.Errorf("the Makefile neither runs the demo with --webhook-local nor generates deploy/webhook:\n%s", mk)
		}
		if k := string(files["deploy/kustomization.yaml"]); !strings.Contains(k, "components:\n  - webhook") {
			t.Errorf("deploy/kustomization.yaml does not add the webhook component:\n%s", k)
		}
	}
}

func TestPlural(t *testing.T) {
	for in, want := range map[string]string{"guestbook": "guestbooks", "policy": "policies", "key": "keys", "class": "classes", "box": "boxes", "batch": "batches"} {
		if got := plural(in); got != want {
			t.Errorf("plural(%q) = %q, want %q", in, got, want)
		}
	}
}

// withoutEnv returns the environment without the variables named.
func withoutEnv(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			keep = keep && name != n
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// TestInit_NewProjectPassesItsMakeTest makes a project with --webhooks
// outside the repository and runs its own make test: the unit test and the end-to-end
// test on a control plane found in the per-user cache directory, with
// $KLOOP_CONTROLPLANE_BIN removed from the environment.
func TestInit_NewProjectPassesItsMakeTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module and runs its end-to-end test on a control plane")
	}
	for _, tool := range []string{"go", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	// The per-user cache directory gets the binaries of this build when it
	// has none yet (CI's make controlplane has put them there already).
	user, err := cpbin.UserDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(user, "etcd")); err != nil {
		from, err := cpbin.Dir()
		if err != nil || from == user {
			t.Fatalf("no control-plane binaries in %s, and none elsewhere to copy (%v): run kloop controlplane install", user, err)
		}
		if out, err := command(ctx, "controlplane", "install", "--from", from).CombinedOutput(); err != nil {
			t.Fatalf("kloop controlplane install --from %s: %v\n%s", from, err, out)
		}
	}

	env := withoutEnv(testenv.BinDirEnv, "KLOOP_TEST_REEXEC")

	// Without --webhooks: the project builds and its tests compile and pass
	// vet; the project with them below runs them.
	plain := filepath.Join(t.TempDir(), "plainbook")
	if out, err := command(ctx, "init", plain, "--module", "example.com/plainbook", "--group", "webapp.example.com", "--kind", "Plainbook").CombinedOutput(); err != nil {
		t.Fatalf("kloop init (no webhooks): %v\n%s", err, out)
	}
	for _, name := range webhookFiles {
		if _, err := os.Stat(filepath.Join(plain, name)); err == nil {
			t.Errorf("kloop init without --webhooks wrote %s", name)
		}
	}
	c := exec.CommandContext(ctx, "go", "vet", "./...")
	c.Dir, c.Env = plain, env
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go vet ./... in the project without webhooks: %v\n%s", err, out)
	}

	dir := filepath.Join(t.TempDir(), "guestbook")
	out, err := command(ctx, "init", dir, "--module", "example.com/guestbook", "--group", "webapp.example.com", "--kind", "Guestbook", "--webhooks").CombinedOutput()
	if err != nil {
		t.Fatalf("kloop init --webhooks: %v\n%s", err, out)
	}
	for _, want := range []string{"replace github.com/kloop-dev/kloop => ", "make test"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kloop init's output does not say %q:\n%s", want, out)
		}
	}
	for _, generated := range []string{"api/v1alpha1/zz_generated.deepcopy.go", "config/crd/webapp.example.com_guestbooks.yaml", "deploy/rbac/role.yaml", "deploy/rbac/leader_election_role.yaml",
		"deploy/webhook/manifests.yaml", "deploy/webhook/webhook_certs_role.yaml", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, generated)); err != nil {
			t.Errorf("kloop init did not generate %s: %v", generated, err)
		}
	}

	for _, step := range [][]string{{"go", "build", "./..."}, {"make", "test", "TESTFLAGS=-v"}} {
		c := exec.CommandContext(ctx, step[0], step[1:]...)
		c.Dir, c.Env = dir, env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s in the new project: %v\n%s", strings.Join(step, " "), err, out)
		}
		if step[0] == "make" {
			for _, want := range []string{"--- PASS: TestNewConfigMap_IsControlledByTheObjectAndHoldsItsMessage", "--- PASS: TestController_KeepsTheConfigMapInPlaceAndReportsReady",
				"--- PASS: TestWebhooks_TheAPIServerDefaultsAndRefusesThroughThem", "--- PASS: TestWebhookManifests_CallThePathsSetupServes"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("make test passed without %q:\n%s", want, out)
				}
			}
		}
	}
}
