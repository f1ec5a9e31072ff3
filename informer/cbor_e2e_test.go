package informer_test

import (
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/samples/foo/apis/samplecontroller/v1alpha1"
	"github.com/kloop-dev/kloop/testenv"
)

// allowCBOR is client-go's feature gates with ClientsAllowCBOR on.
type allowCBOR struct{ clientfeatures.Gates }

func (g allowCBOR) Enabled(f clientfeatures.Feature) bool {
	return f == clientfeatures.ClientsAllowCBOR || g.Gates.Enabled(f)
}

// contentTypes records the content types of the responses through it.
type contentTypes struct {
	rt   http.RoundTripper
	mu   *sync.Mutex
	seen map[string]bool
}

func (c contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil && strings.Contains(r.URL.Path, "/foos") {
		c.mu.Lock()
		c.seen[resp.Header.Get("Content-Type")] = true
		c.mu.Unlock()
	}
	return resp, err
}

// A typed custom resource's informer reads CBOR where the API server
// serves it (its CBORServingAndStorage gate) and client-go allows it (its
// ClientsAllowCBOR gate, set process-wide by the program), and decodes it
// into the Go type as it decodes JSON.
func TestE2E_TypedCustomResourcesAreReadAsCBORWhereServedAndAllowed(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{FeatureGates: map[string]bool{"CBORServingAndStorage": true}})
	ctx := e2eContext(t, 90*time.Second, "CBOR test")
	crd, err := os.ReadFile("../samples/foo/crd/samplecontroller.k8s.io_foos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.InstallCRD(ctx, env.Config, crd); err != nil {
		t.Fatal(err)
	}
	ns := testenv.NewNamespace(t, kubernetes.NewForConfigOrDie(env.Config), "cbor")
	web := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "Foo",
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"deploymentName": "web-deploy", "replicas": int64(3)},
	}}
	if _, err := dynamic.NewForConfigOrDie(env.Config).Resource(v1alpha1.Resource).Namespace(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	prev := clientfeatures.FeatureGates()
	clientfeatures.ReplaceFeatureGates(allowCBOR{prev})
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(prev) })
	cfg := rest.CopyConfig(env.Config)
	var mu sync.Mutex
	seen := map[string]bool{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return contentTypes{rt: rt, mu: &mu, seen: seen} })
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f := informer.NewFactory(cfg, informer.FactoryOptions{Scheme: scheme, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	inf, err := informer.OfResource[*v1alpha1.Foo](f, v1alpha1.Resource, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	runFactory(t, f)
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := inf.Lister().Get(ns, "web")
	if !ok || got.Spec.DeploymentName != "web-deploy" || got.Spec.Replicas == nil || *got.Spec.Replicas != 3 || got.Labels["app"] != "web" || got.UID == "" {
		t.Fatalf("cached Foo = %+v (found %v), want the one created", got, ok)
	}
	mu.Lock()
	defer mu.Unlock()
	cbor := false
	for ct := range seen {
		cbor = cbor || strings.HasPrefix(ct, "application/cbor")
	}
	if !cbor {
		t.Errorf("the informer was answered in %v, want CBOR", seen)
	}
}
