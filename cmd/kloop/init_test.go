package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"go/format"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/cpbin"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/testenv"
)

// initArgs are kloop init's flags for a valid project, with changes.
func initArgs(dir string, change map[string]string) []string {
	flags := map[string]string{"--module": "example.com/guestbook", "--group": "webapp.example.com", "--kind": "Guestbook", "--version": "v1"}
	for k, v := range change {
		flags[k] = v
	}
	args := []string{"init", dir, "--no-generate"}
	for _, k := range []string{"--module", "--group", "--kind", "--version", "--webhooks"} {
		if v, ok := flags[k]; ok {
			args = append(args, k+"="+v)
		}
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
		{"missing kind", map[string]string{"--kind": ""}, false, []string{"--group and --kind (a new API type) or --for (a built-in kind) are required"}},
		{"webhook form unknown", map[string]string{"--webhooks": "defaulting,conversion"}, false, []string{"--webhooks", `"conversion" is not a webhook`, "--webhooks=defaulting"}},
		{"group of a built-in kind", map[string]string{"--group": "apps.k8s.io"}, false, []string{"--group", "reserved for Kubernetes", "--for apps/v1/Deployment"}},
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
			checkRefused(t, filepath.Dir(dir), initArgs(dir, tc.change), tc.want)
		})
	}
}

// checkRefused runs kloop with args and checks that it exits 2 (bad
// input), its stderr says each of want, and nothing under parent changed.
func checkRefused(t *testing.T, parent string, args []string, want []string) {
	t.Helper()
	before := listFiles(t, parent)
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	if code != 2 {
		t.Errorf("exit code %d, want 2 (bad input); stderr:\n%s", code, stderr.String())
	}
	for _, w := range want {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr %q does not say %q", stderr.String(), w)
		}
	}
	if after := listFiles(t, parent); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("kloop init wrote files on bad input: before %v, after %v", before, after)
	}
}

func TestInit_ForRefusesBadInputSayingWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string // after init DIR --no-generate --module example.com/redeployer
		want []string
	}{
		{"no kind after the version", []string{"--for", "apps/v1"}, []string{"--for", "GROUP/VERSION/KIND, such as apps/v1/Deployment", "apps/v1/StatefulSet"}},
		{"too many parts", []string{"--for", "apps/v1/Deployment/x"}, []string{"--for", "GROUP/VERSION/KIND"}},
		{"kind in lower case", []string{"--for", "apps/v1/deployment"}, []string{"--for", "did you mean apps/v1/Deployment?"}},
		{"core group spelled out, kind misspelled", []string{"--for", "core/v1/configmap"}, []string{"did you mean v1/ConfigMap?"}},
		{"built-in kind without an example", []string{"--for", "v1/Node"}, []string{"--for", "a kind kloop init has an example object of", "apps/v1/Deployment", "--group and --kind"}},
		{"not a built-in kind", []string{"--for", "webapp.example.com/v1/Guestbook"}, []string{"--for", "a built-in Kubernetes kind", "give --group and --kind instead"}},
		{"with --kind", []string{"--for", "apps/v1/Deployment", "--kind", "Guestbook"}, []string{"--for and --group, --kind or --version", "give one or the other"}},
		{"with --version", []string{"--for", "apps/v1/Deployment", "--version", "v1"}, []string{"--for and --group, --kind or --version"}},
		{"with --webhooks", []string{"--for", "apps/v1/Deployment", "--webhooks"}, []string{"--webhooks and --for", "leave out --webhooks"}},
		{"no module", []string{"--for", "apps/v1/Deployment", "--module", ""}, []string{"--module, and --group and --kind"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "project")
			args := append([]string{"init", dir, "--no-generate", "--module", "example.com/redeployer"}, tc.args...)
			checkRefused(t, filepath.Dir(dir), args, tc.want)
		})
	}
}

// TestInit_WebhooksListAfterASpaceIsNotTakenForTheDirectory: --webhooks
// takes an optional value, so "--webhooks defaulting" would otherwise make
// a project with both webhooks in a directory called defaulting.
func TestInit_WebhooksListAfterASpaceIsNotTakenForTheDirectory(t *testing.T) {
	parent := t.TempDir()
	t.Chdir(parent)
	checkRefused(t, parent, []string{"init", "--no-generate", "--module", "example.com/guestbook", "--group", "webapp.example.com", "--kind", "Guestbook", "--webhooks", "defaulting"},
		[]string{"--webhooks takes its list after '='", "--webhooks=defaulting", `"defaulting" was read as the directory`})
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

// renderProject renders the project f describes.
func renderProject(t *testing.T, f *initFlags) (*project, map[string][]byte) {
	t.Helper()
	src, err := findCheckout("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.newProject(filepath.Join(t.TempDir(), "new"), src)
	if err != nil {
		t.Fatal(err)
	}
	files, err := p.render()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if len(bytes.TrimSpace(data)) == 0 {
			t.Errorf("%s is empty", name)
		}
		if filepath.Ext(name) != ".go" {
			continue
		}
		if formatted, err := format.Source(data); err != nil || !bytes.Equal(formatted, data) {
			t.Errorf("%s is not gofmt'ed (%v)", name, err)
		}
	}
	return p, files
}

func TestInit_EachWebhookFormWritesOnlyItsFilesMarkersTestsAndPatches(t *testing.T) {
	const (
		mutateMarker   = "path=/mutate-webapp-example-com-v1-guestbook,mutating=true"
		validateMarker = "path=/validate-webapp-example-com-v1-guestbook,mutating=false"
	)
	for _, tc := range []struct {
		flag                   string // --webhooks' value
		defaulting, validation bool
		e2eTest                string
	}{
		{"", false, false, ""},
		{"false", false, false, ""},
		{webhooksBoth, true, true, "TestWebhooks_TheAPIServerDefaultsAndRefusesThroughThem"}, // --webhooks alone
		{"true", true, true, "TestWebhooks_TheAPIServerDefaultsAndRefusesThroughThem"},       // --webhooks=true, from when it was a bool
		{"validation,defaulting", true, true, "TestWebhooks_TheAPIServerDefaultsAndRefusesThroughThem"},
		{"defaulting", true, false, "TestWebhooks_TheAPIServerDefaultsThroughIt"},
		{"validation", false, true, "TestWebhooks_TheAPIServerRefusesThroughIt"},
	} {
		t.Run("--webhooks="+tc.flag, func(t *testing.T) {
			_, files := renderProject(t, &initFlags{module: "example.com/guestbook", group: "webapp.example.com", kind: "Guestbook", version: "v1", webhooks: tc.flag})
			some := tc.defaulting || tc.validation
			for _, name := range webhookFiles {
				if _, ok := files[name]; ok != some {
					t.Errorf("%s written %v", name, ok)
				}
			}
			for _, name := range []string{"internal/controller/controller.go", "Makefile", "deploy/kustomization.yaml", "README.md"} {
				if got := strings.Contains(strings.ToLower(string(files[name])), "webhook"); got != some {
					t.Errorf("%s mentions webhooks %v", name, got)
				}
			}
			if !some {
				return
			}
			// Each piece of a form is there exactly when the form is.
			for _, c := range []struct {
				file, text string
				want       bool
			}{
				{"internal/controller/webhook.go", mutateMarker, tc.defaulting},
				{"internal/controller/webhook.go", "func Default(", tc.defaulting},
				{"internal/controller/webhook.go", validateMarker, tc.validation},
				{"internal/controller/webhook.go", "type Validator struct", tc.validation},
				{"internal/controller/controller.go", ".Defaulter(Default)", tc.defaulting},
				{"internal/controller/controller.go", ".Validator(Validator{})", tc.validation},
				{"internal/controller/webhook_test.go", "func TestDefault_", tc.defaulting},
				{"internal/controller/webhook_test.go", "webhook.MutatePath(gvk)", tc.defaulting},
				{"internal/controller/webhook_test.go", "func TestValidator_", tc.validation},
				{"internal/controller/webhook_test.go", "webhook.ValidatePath(gvk)", tc.validation},
				{"internal/controller/e2e_test.go", "controller.DefaultMessage", tc.defaulting},
				{"internal/controller/e2e_test.go", "controller.MaxMessageLength", tc.validation},
				{"internal/controller/e2e_test.go", "func " + tc.e2eTest + "(", true},
				{"deploy/webhook/kustomization.yaml", "kind: MutatingWebhookConfiguration", tc.defaulting},
				{"deploy/webhook/kustomization.yaml", "value: guestbook-mutating", tc.defaulting},
				{"deploy/webhook/kustomization.yaml", "kind: ValidatingWebhookConfiguration", tc.validation},
				{"deploy/webhook/kustomization.yaml", "value: guestbook-validating", tc.validation},
				{"deploy/kustomization.yaml", "components:\n  - webhook", true},
				{"Makefile", "--webhook-local", true},
				{"Makefile", "output:webhook:artifacts:config=deploy/webhook", true},
			} {
				if got := strings.Contains(string(files[c.file]), c.text); got != c.want {
					t.Errorf("%s has %q: %v, want %v", c.file, c.text, got, c.want)
				}
			}
			if strings.Count(string(files["internal/controller/webhook.go"]), "+kubebuilder:webhook:") != btoi(tc.defaulting)+btoi(tc.validation) {
				t.Errorf("webhook.go has other markers than its form's:\n%s", files["internal/controller/webhook.go"])
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestInit_ForABuiltinKindHasNoAPIAndControlsThatKind(t *testing.T) {
	for _, k := range builtinKinds {
		t.Run(forName(k.gvk), func(t *testing.T) {
			p, files := renderProject(t, &initFlags{module: "example.com/redeployer", forKind: forName(k.gvk)})
			for name := range files {
				if strings.HasPrefix(name, "api/") || strings.HasPrefix(name, "config/crd/") {
					t.Errorf("a project of a built-in kind has %s", name)
				}
			}
			for _, name := range []string{"go.mod", "Makefile", "README.md", "cmd/redeployer/main.go", "internal/controller/controller.go",
				"internal/controller/controller_test.go", "internal/controller/e2e_test.go", "deploy/kustomization.yaml", "deploy/deployment.yaml"} {
				if _, ok := files[name]; !ok {
					t.Errorf("no %s among the files", name)
				}
			}
			group := k.gvk.Group
			if group == "" {
				group = `""`
			}
			resource := plural(strings.ToLower(k.gvk.Kind))
			controller := string(files["internal/controller/controller.go"])
			for _, want := range []string{
				"+kubebuilder:rbac:groups=" + group + ",resources=" + resource + ",verbs=list;watch;patch",
				p.Alias + ` "` + p.Package + `"`,
				"kloop.Objects[*" + p.Alias + "." + k.gvk.Kind + "](app)",
				".For(r.Objects)",
			} {
				if !strings.Contains(controller, want) {
					t.Errorf("controller.go does not say %q:\n%s", want, controller)
				}
			}
			// The API package is the one the scheme has the kind in.
			obj, err := kloop.NewScheme().New(k.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if got := reflect.TypeOf(obj).Elem(); got.PkgPath() != p.Package || got.Name() != k.gvk.Kind {
				t.Errorf("the kind is %s.%s, the project imports %s", got.PkgPath(), got.Name(), p.Package)
			}
			// The example decodes, strictly, into the kind (the e2e test
			// of the generated project creates it on a real API server).
			sampleFile := "config/samples/" + k.gvk.Version + "_" + strings.ToLower(k.gvk.Kind) + ".yaml"
			sample, err := manifest.Decode[runtime.Object](kloop.NewScheme(), files[sampleFile])
			if err != nil {
				t.Fatalf("%s: %v\n%s", sampleFile, err, files[sampleFile])
			}
			if gvk := sample.GetObjectKind().GroupVersionKind(); gvk != k.gvk {
				t.Errorf("%s is a %v", sampleFile, gvk)
			}
			for _, c := range []struct{ file, text string }{
				{"Makefile", "crd:crdVersions"},
				{"Makefile", "config/crd"},
				{"deploy/kustomization.yaml", "config/crd"},
				{"cmd/redeployer/main.go", "CRD"},
				{"README.md", "api/"},
			} {
				if strings.Contains(string(files[c.file]), c.text) {
					t.Errorf("%s of a project without an API type says %q:\n%s", c.file, c.text, files[c.file])
				}
			}
		})
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

// TestInit_NewProjectPassesItsMakeTest makes projects of each form outside
// the repository and runs their own make test: the unit tests and the
// end-to-end tests on a control plane found in the per-user cache
// directory, with $KLOOP_CONTROLPLANE_BIN removed from the environment.
// Two forms get the cheaper check: go vet, and go test -short (the unit
// tests; every end-to-end test of theirs is in a form that runs them).
func TestInit_NewProjectPassesItsMakeTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module and runs its end-to-end test on a control plane")
	}
	for _, tool := range []string{"go", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
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
	kubectl, _ := exec.LookPath("kubectl") // for kubectl kustomize deploy, when there is one

	for _, tc := range []struct {
		name     string
		args     []string // kloop init's, after DIR --module example.com/NAME
		makeTest bool     // else go vet and go test -short
		files    []string // generated, or written, in the project
		absent   []string
		pass     []string // tests that pass
		kinds    []string // what kubectl kustomize deploy makes, with the count of each
	}{
		{
			name: "plainbook", args: []string{"--group", "webapp.example.com", "--kind", "Plainbook"},
			files:  []string{"api/v1alpha1/zz_generated.deepcopy.go", "api/applyconfiguration/utils.go", "config/crd/webapp.example.com_plainbooks.yaml"},
			absent: webhookFiles,
			pass:   []string{"TestReconcile_MakesTheConfigMapAndReportsReady"},
			kinds:  []string{"1 CustomResourceDefinition", "1 Deployment", "0 MutatingWebhookConfiguration", "0 ValidatingWebhookConfiguration"},
		},
		{
			name: "guestbook", args: []string{"--group", "webapp.example.com", "--kind", "Guestbook", "--webhooks"}, makeTest: true,
			files: []string{"api/v1alpha1/zz_generated.deepcopy.go", "config/crd/webapp.example.com_guestbooks.yaml", "deploy/rbac/role.yaml", "deploy/rbac/leader_election_role.yaml",
				"deploy/webhook/manifests.yaml", "deploy/webhook/webhook_certs_role.yaml", "go.sum"},
			pass: []string{"TestNewConfigMap_IsControlledByTheObjectAndHoldsItsMessage", "TestController_KeepsTheConfigMapInPlaceAndReportsReady",
				"TestWebhooks_TheAPIServerDefaultsAndRefusesThroughThem", "TestWebhookManifests_CallThePathsSetupServes", "TestDefault_GivesAMessageOnlyWhenThereIsNone",
				"TestValidator_RefusesATooLongMessageSayingTheLimit"},
			kinds: []string{"1 CustomResourceDefinition", "1 MutatingWebhookConfiguration", "1 ValidatingWebhookConfiguration", "1 Service"},
		},
		{
			name: "defaultbook", args: []string{"--group", "webapp.example.com", "--kind", "Defaultbook", "--webhooks=defaulting"},
			files: []string{"deploy/webhook/manifests.yaml"},
			pass:  []string{"TestDefault_GivesAMessageOnlyWhenThereIsNone", "TestWebhookManifests_CallThePathsSetupServes"},
			kinds: []string{"1 MutatingWebhookConfiguration", "0 ValidatingWebhookConfiguration", "1 Service"},
		},
		{
			name: "validbook", args: []string{"--group", "webapp.example.com", "--kind", "Validbook", "--webhooks=validation"}, makeTest: true,
			files: []string{"deploy/webhook/manifests.yaml"},
			pass: []string{"TestValidator_RefusesATooLongMessageSayingTheLimit", "TestWebhookManifests_CallThePathsSetupServes", "TestWebhooks_TheAPIServerRefusesThroughIt",
				"TestController_KeepsTheConfigMapInPlaceAndReportsReady"},
			kinds: []string{"0 MutatingWebhookConfiguration", "1 ValidatingWebhookConfiguration", "1 Service"},
		},
		{
			name: "redeployer", args: []string{"--for", "apps/v1/Deployment"}, makeTest: true,
			files:  []string{"deploy/rbac/role.yaml", "config/samples/v1_deployment.yaml", "go.sum"},
			absent: append([]string{"api", "config/crd"}, webhookFiles...),
			pass:   []string{"TestReconcile_LabelsTheObject", "TestController_KeepsTheSeenLabel"},
			kinds:  []string{"0 CustomResourceDefinition", "1 Deployment", "1 ClusterRole", "0 MutatingWebhookConfiguration"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.name)
			out, err := command(ctx, append([]string{"init", dir, "--module", "example.com/" + tc.name}, tc.args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("kloop init %v: %v\n%s", tc.args, err, out)
			}
			for _, want := range []string{"replace github.com/kloop-dev/kloop => ", "make test"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("kloop init's output does not say %q:\n%s", want, out)
				}
			}
			for _, name := range tc.files {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Errorf("kloop init did not make %s: %v", name, err)
				}
			}
			for _, name := range tc.absent {
				if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
					t.Errorf("kloop init %v made %s", tc.args, name)
				}
			}
			if tc.name == "redeployer" {
				if role, err := os.ReadFile(filepath.Join(dir, "deploy", "rbac", "role.yaml")); err != nil || !strings.Contains(string(role), "- apps\n  resources:\n  - deployments\n  verbs:\n  - list\n  - patch\n  - watch") {
					t.Errorf("deploy/rbac/role.yaml does not let the controller list, patch and watch deployments (%v):\n%s", err, role)
				}
			}

			steps := [][]string{{"go", "build", "./..."}, {"make", "test", "TESTFLAGS=-v"}}
			if !tc.makeTest {
				steps = [][]string{{"go", "vet", "./..."}, {"go", "test", "-race", "-short", "-count=1", "-v", "./..."}}
			}
			for _, step := range steps {
				c := exec.CommandContext(ctx, step[0], step[1:]...)
				c.Dir, c.Env = dir, env
				out, err := c.CombinedOutput()
				if err != nil {
					t.Fatalf("%s in the new project: %v\n%s", strings.Join(step, " "), err, out)
				}
				if step[1] != "test" {
					continue
				}
				for _, name := range tc.pass {
					if !strings.Contains(string(out), "--- PASS: "+name+" ") {
						t.Errorf("%s passed without %s passing:\n%s", strings.Join(step, " "), name, out)
					}
				}
			}

			if kubectl == "" {
				return
			}
			out, err = exec.CommandContext(ctx, kubectl, "kustomize", filepath.Join(dir, "deploy")).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl kustomize deploy: %v\n%s", err, out)
			}
			for _, want := range tc.kinds {
				n, kind, _ := strings.Cut(want, " ")
				if got := strings.Count(string(out), "\nkind: "+kind+"\n"); strconv.Itoa(got) != n {
					t.Errorf("kubectl kustomize deploy makes %d %s, want %s:\n%s", got, kind, n, out)
				}
			}
		})
	}
}

// writeProxyModule writes version of the module path, with files (go.mod
// among them), into dir as a file:// module proxy serves it.
func writeProxyModule(t *testing.T, dir, path, version string, files map[string]string) {
	t.Helper()
	v := filepath.Join(dir, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, text := range files {
		w, err := z.Create(path + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	list, _ := os.ReadFile(filepath.Join(v, "list"))
	for name, data := range map[string][]byte{
		version + ".info": fmt.Appendf(nil, `{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, version),
		version + ".mod":  []byte(files["go.mod"]),
		version + ".zip":  buf.Bytes(),
		"list":            append(list, version+"\n"...),
	} {
		if err := os.WriteFile(filepath.Join(v, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInit_DependencyVersionsChangeWithoutLookingUpKloop: kloop is not on a
// module proxy, so the new go.mod must resolve it through its replace
// directive alone. Everything here runs offline: the module cache is the
// only source (after go mod download in the kloop checkout fills it), and
// a file:// proxy serves a small module at two versions and an older
// k8s.io/apimachinery that is only a go.mod.
func TestInit_DependencyVersionsChangeWithoutLookingUpKloop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command on a new module")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	src, err := findCheckout("")
	if err != nil {
		t.Fatal(err)
	}
	goCmd := func(dir string, env []string, args ...string) (string, error) {
		c := exec.CommandContext(ctx, "go", args...)
		c.Dir, c.Env = dir, append(withoutEnv("GOFLAGS", "GOPROXY", "GONOPROXY", "GOPRIVATE", "GOMODCACHE", "GOWORK", "GOTOOLCHAIN", "GOSUMDB", testenv.BinDirEnv, "KLOOP_TEST_REEXEC"), env...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	// The modules kloop needs, in the module cache: a no-op when the
	// cache has them; else the only step that reaches the module proxy
	// (kloop is the main module there, and not looked up).
	if out, err := goCmd(src.Dir, []string{"GOFLAGS=-mod=mod"}, "mod", "download"); err != nil {
		t.Fatalf("go mod download in %s: %v\n%s", src.Dir, err, out)
	}
	modCache, err := goCmd(src.Dir, nil, "env", "GOMODCACHE")
	if err != nil {
		t.Fatal(err)
	}
	modCache = strings.TrimSpace(modCache)

	dir := filepath.Join(t.TempDir(), "guestbook")
	var stdout, stderr bytes.Buffer
	if code := run(initArgs(dir, nil), &stdout, &stderr); code != 0 {
		t.Fatalf("kloop init: exit code %d\n%s", code, stderr.String())
	}
	offline := []string{"GOPROXY=off", "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local"}
	if out, err := goCmd(dir, offline, "mod", "tidy"); err != nil {
		t.Fatalf("go mod tidy with GOPROXY=off: %v\n%s", err, out)
	}
	out, err := goCmd(dir, offline, "list", "-m", "github.com/kloop-dev/kloop")
	if want := "github.com/kloop-dev/kloop v0.0.0-00010101000000-000000000000 => " + src.Dir + "\n"; err != nil || out != want {
		t.Errorf("go list -m github.com/kloop-dev/kloop with GOPROXY=off: %v, %q; want %q", err, out, want)
	}

	// go get, on a module cache of its own (so that the modules made up
	// here stay out of the real one), served by the real cache's download
	// directory and, after it, the made-up modules.
	proxy := t.TempDir()
	for _, v := range []string{"v1.0.0", "v1.1.0"} {
		writeProxyModule(t, proxy, "example.com/tinydep", v, map[string]string{"go.mod": "module example.com/tinydep\n\ngo 1.22\n", "tiny.go": "package tinydep\n"})
	}
	writeProxyModule(t, proxy, "k8s.io/apimachinery", "v0.0.1", map[string]string{"go.mod": "module k8s.io/apimachinery\n\ngo 1.22\n"})
	local := []string{"GOMODCACHE=" + t.TempDir(), "GOFLAGS=-mod=mod -modcacherw", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local",
		"GOPROXY=" + (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(modCache, "cache", "download"))}).String() + "," + (&url.URL{Scheme: "file", Path: filepath.ToSlash(proxy)}).String()}
	gomod := func() string {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, step := range []struct{ version, want string }{{"v1.1.0", "added"}, {"v1.0.0", "downgraded"}} {
		out, err := goCmd(dir, local, "get", "example.com/tinydep@"+step.version)
		if err != nil || !strings.Contains(out, step.want) {
			t.Fatalf("go get example.com/tinydep@%s: %v, want it %s\n%s", step.version, err, step.want, out)
		}
		if !strings.Contains(gomod(), "example.com/tinydep "+step.version) {
			t.Errorf("go.mod does not require example.com/tinydep %s:\n%s", step.version, gomod())
		}
	}

	// Below the version kloop requires, go get would have to take an
	// older kloop; there is none, which it says with -v when the lookup
	// of kloop's versions is answered (here: no such module). go.mod
	// stays as it was.
	before := gomod()
	out, err = goCmd(dir, local, "get", "-v", "k8s.io/apimachinery@v0.0.1")
	if err == nil {
		t.Fatalf("go get k8s.io/apimachinery@v0.0.1 below kloop's requirement succeeded:\n%s", out)
	}
	if want := "github.com/kloop-dev/kloop@v0.0.0-00010101000000-000000000000 requires k8s.io/apimachinery@"; !strings.Contains(out, want) || !strings.Contains(out, "but v0.0.1 is requested") {
		t.Errorf("go get -v of an older k8s.io/apimachinery does not say %q ... but v0.0.1 is requested:\n%s", want, out)
	}
	if gomod() != before {
		t.Errorf("the failed go get changed go.mod:\n%s", gomod())
	}
}

// TestInit_BuiltinExamplesAreAcceptedByTheAPIServer creates the example
// object of every kind --for takes on a real API server, as the generated
// end-to-end test and make demo do.
func TestInit_BuiltinExamplesAreAcceptedByTheAPIServer(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	ns := testenv.NewNamespace(t, kubernetes.NewForConfigOrDie(env.Config), "examples")
	dc := dynamic.NewForConfigOrDie(env.Config)
	for _, k := range builtinKinds {
		p, files := renderProject(t, &initFlags{module: "example.com/redeployer", forKind: forName(k.gvk)})
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(files["config/samples/"+p.Version+"_"+p.Lower+".yaml"], &obj.Object); err != nil {
			t.Fatal(err)
		}
		obj.SetNamespace(ns)
		created, err := dc.Resource(k.gvk.GroupVersion().WithResource(p.Plural)).Namespace(ns).Create(t.Context(), &obj, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("create the example %s: %v", forName(k.gvk), err)
			continue
		}
		if created.GetKind() != k.gvk.Kind || created.GetName() != p.Lower+"-sample" {
			t.Errorf("created %s %s, want %s %s-sample", created.GetKind(), created.GetName(), k.gvk.Kind, p.Lower)
		}
	}
}
