package foo_test

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
)

// crdScheme decodes CustomResourceDefinitions.
var crdScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

func mustCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := manifest.Decode[*apiextensionsv1.CustomResourceDefinition](crdScheme, b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}

// schemaShape is what validation and pruning look at in a schema: the
// property tree with types, bounds and required lists. Descriptions and
// int32 formats do not change which objects are accepted.
func schemaShape(s apiextensionsv1.JSONSchemaProps, path string, out map[string]string) {
	var b strings.Builder
	b.WriteString("type=" + s.Type)
	if s.Minimum != nil {
		b.WriteString(" min=" + strconv.FormatFloat(*s.Minimum, 'g', -1, 64))
	}
	if s.Maximum != nil {
		b.WriteString(" max=" + strconv.FormatFloat(*s.Maximum, 'g', -1, 64))
	}
	if len(s.Required) > 0 {
		req := slices.Clone(s.Required)
		slices.Sort(req)
		b.WriteString(" required=" + strings.Join(req, ","))
	}
	if s.Nullable {
		b.WriteString(" nullable")
	}
	out[path] = b.String()
	for name, p := range s.Properties {
		schemaShape(p, path+"."+name, out)
	}
}

func TestCRD_GeneratedMatchesSampleControllersCRD(t *testing.T) {
	ours := mustCRD(t, "crd/samplecontroller.k8s.io_foos.yaml")
	if !reflect.DeepEqual(ours.Spec, mustCRD(t, "crd/samplecontroller.k8s.io_foos.yaml").Spec) {
		t.Fatal("decoding is not deterministic")
	}
	embedded, err := manifest.Decode[*apiextensionsv1.CustomResourceDefinition](crdScheme, foo.CRDYAML)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(embedded, ours) {
		t.Error("foo.CRDYAML is not the generated CRD file")
	}
	theirs := mustCRD(t, "artifacts/examples/crd-status-subresource.yaml")
	plain := mustCRD(t, "artifacts/examples/crd.yaml")

	if ours.Name != theirs.Name {
		t.Errorf("name %q, want %q", ours.Name, theirs.Name)
	}
	const approval = "api-approved.kubernetes.io"
	if got, want := ours.Annotations[approval], theirs.Annotations[approval]; got != want || want == "" {
		t.Errorf("annotation %s = %q, want %q", approval, got, want)
	}
	if ours.Spec.Group != theirs.Spec.Group || ours.Spec.Group != v1alpha1.GroupName {
		t.Errorf("group %q, want %q", ours.Spec.Group, theirs.Spec.Group)
	}
	if ours.Spec.Scope != theirs.Spec.Scope {
		t.Errorf("scope %q, want %q", ours.Spec.Scope, theirs.Spec.Scope)
	}
	if ours.Spec.Names.Kind != theirs.Spec.Names.Kind || ours.Spec.Names.Plural != theirs.Spec.Names.Plural ||
		ours.Spec.Names.Kind != v1alpha1.Kind.Kind || ours.Spec.Names.Plural != v1alpha1.Resource.Resource {
		t.Errorf("names %+v, want kind and plural of %+v", ours.Spec.Names, theirs.Spec.Names)
	}
	if len(ours.Spec.Names.ShortNames) > 0 || len(ours.Spec.Names.Categories) > 0 {
		t.Errorf("names %+v add short names or categories sample-controller does not have", ours.Spec.Names)
	}
	if len(ours.Spec.Versions) != 1 || len(theirs.Spec.Versions) != 1 {
		t.Fatalf("versions: ours %d, theirs %d, want 1 each", len(ours.Spec.Versions), len(theirs.Spec.Versions))
	}
	ov, tv := ours.Spec.Versions[0], theirs.Spec.Versions[0]
	if ov.Name != tv.Name || ov.Name != v1alpha1.SchemeGroupVersion.Version || ov.Served != tv.Served || ov.Storage != tv.Storage {
		t.Errorf("version %s served=%v storage=%v, want %s served=%v storage=%v", ov.Name, ov.Served, ov.Storage, tv.Name, tv.Served, tv.Storage)
	}
	if !reflect.DeepEqual(ov.Subresources, tv.Subresources) {
		t.Errorf("subresources %+v, want %+v (crd-status-subresource.yaml)", ov.Subresources, tv.Subresources)
	}
	if plain.Spec.Versions[0].Subresources != nil {
		t.Errorf("sample-controller's crd.yaml has subresources %+v; the fallback to updates is tested against it having none", plain.Spec.Versions[0].Subresources)
	}

	got, want := map[string]string{}, map[string]string{}
	schemaShape(*ov.Schema.OpenAPIV3Schema, "", got)
	schemaShape(*tv.Schema.OpenAPIV3Schema, "", want)
	// controller-gen also describes the fields every object has.
	for _, p := range []string{".apiVersion", ".kind", ".metadata"} {
		delete(got, p)
	}
	// kloop's Foo adds the observed generation and the conditions to the
	// status, which sample-controller's schemas prune.
	for p := range got {
		if strings.HasPrefix(p, ".status.conditions") || p == ".status.observedGeneration" {
			delete(got, p)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("schema differs from sample-controller's:\n got  %v\n want %v", got, want)
	}
	for _, p := range []string{".spec.deploymentName", ".spec.replicas", ".status.availableReplicas"} {
		if _, ok := want[p]; !ok {
			t.Errorf("sample-controller's schema lacks %s; the test is reading the wrong file", p)
		}
	}
}

func TestDecodeFoo_SampleControllersExampleDecodesIntoFoo(t *testing.T) {
	b, err := os.ReadFile("artifacts/examples/example-foo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(foo.ExampleFooYAML) {
		t.Error("foo.ExampleFooYAML is not artifacts/examples/example-foo.yaml")
	}
	f, err := manifest.Decode[*v1alpha1.Foo](foo.Scheme(), b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "example-foo" || f.Namespace != "" || f.Spec.DeploymentName != "example-foo" || ptr.Deref(f.Spec.Replicas, 0) != 1 {
		t.Errorf("decoded %s/%s spec %+v (replicas %v), want example-foo with deploymentName example-foo and 1 replica",
			f.Namespace, f.Name, f.Spec, ptr.Deref(f.Spec.Replicas, -1))
	}
	if f.APIVersion != "samplecontroller.k8s.io/v1alpha1" || f.Kind != "Foo" {
		t.Errorf("decoded %s %s", f.APIVersion, f.Kind)
	}
}

func TestDecodeFoo_RejectsUnknownFieldsAndOtherKinds(t *testing.T) {
	for name, text := range map[string]string{
		"unknown field": "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: x}\nspec: {deploymentName: x, replica: 2}\n",
		"other kind":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"other version": "apiVersion: samplecontroller.k8s.io/v1beta1\nkind: Foo\nmetadata: {name: x}\n",
	} {
		if f, err := manifest.Decode[*v1alpha1.Foo](foo.Scheme(), []byte(text)); err == nil {
			t.Errorf("%s: decoded %+v, want an error", name, f)
		}
	}
}
