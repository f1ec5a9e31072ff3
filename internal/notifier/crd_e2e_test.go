package notifier

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/internal/metricstest"
	"github.com/kloop-dev/kloop/testenv"
)

var gadgets = schema.GroupVersionResource{Group: "notifier.kloop.dev", Version: "v1", Resource: "gadgets"}

// installGadgetCRD creates the Gadget CRD (once per control plane) and
// waits until the API server serves gadgets.
func installGadgetCRD(t *testing.T, ctx context.Context, cfg *rest.Config) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: gadgets.Resource + "." + gadgets.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgets.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gadgets.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create CRD: %v", err)
	}
	testwait.CRDServed(t, cfg, crd.Name)
}

func TestNotifier_CustomResourcesThroughTheDynamicClientAndMetricsOnTheHTTPEndpoint(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kc, "notifier-crd")
	installGadgetCRD(t, ctx, e.Config)
	res := dynamic.NewForConfigOrDie(e.Config).Resource(gadgets).Namespace(ns)
	gadget := func(name string, size int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gadgets.GroupVersion().String(), "kind": "Gadget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"size": size},
		}}
	}
	if _, err := res.Create(ctx, gadget("before", 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create gadget: %v", err)
	}

	recv := newReceiver(t)
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	app := newApp(t, e.Config, kloop.Options{Logger: logs.Logger(), Registry: reg, MetricsAddr: "127.0.0.1:0", HealthAddr: "127.0.0.1:0"})
	n, err := New(app, Config{
		Namespace:       ns,
		CustomResources: []CustomResource{{Group: gadgets.Group, Version: gadgets.Version, Resource: gadgets.Resource}},
		Sinks:           []SinkConfig{{Name: "hook", Type: SinkWebhook, URL: recv.URL + "/hook", IncludeObject: true, IncludeChanges: true}},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done, stop := runSynced(t, n, logs)

	g, err := res.Create(ctx, gadget("g1", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := recv.waitFor(t, "/hook", "create of g1", is("Created", "gadgets", "g1"))
	if created.Object["kind"] != "Gadget" || created.EventMeta.Namespace != ns {
		t.Errorf("create payload: %+v", created)
	}
	if err := unstructured.SetNestedField(g.Object, int64(2), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	upd := recv.waitFor(t, "/hook", "update of g1", is("Updated", "gadgets", "g1"))
	if !slices.Equal(upd.Changes, []string{"spec.size"}) {
		t.Errorf("update changes %q, want [spec.size]", upd.Changes)
	}
	if err := res.Delete(ctx, "g1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recv.waitFor(t, "/hook", "delete of g1", is("Deleted", "gadgets", "g1"))
	if got := summary(recv.payloads("/hook")); got != "Created gadgets "+ns+"/g1\nUpdated gadgets "+ns+"/g1 [spec.size]\nDeleted gadgets "+ns+"/g1\n" {
		t.Errorf("received:\n%s", got)
	}

	resp, err := http.Get("http://" + app.Manager().Status().MetricsAddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// Counted before the event reached the sink, so already there (the
	// sent counter moves only after the receiver answered: checked below).
	for _, want := range []string{
		`kubewatch_events_total{eventType="delete",resourceType="gadgets"} 1`,
		`kubewatch_events_suppressed_total{reason="initial",resourceType="gadgets"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after a stop", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
	}
	if v := metricstest.Value(t, reg, MetricSent, "sink", "hook", "resourceType", "gadgets", "eventType", "delete"); v != 1 {
		t.Errorf("sent{hook, gadgets, delete} = %v, want 1", v)
	}
}
