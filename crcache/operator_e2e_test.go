package crcache_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kloopcache "github.com/kloop-dev/kloop/crcache"
	widgetsv1 "github.com/kloop-dev/kloop/crcache/internal/operator/api/v1"
	"github.com/kloop-dev/kloop/crcache/internal/operator/controller"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// TestOperator_ReconcilesOnKloopsCache runs a controller-runtime operator,
// written as kubebuilder lays one out (internal/operator: a Widget kind and
// a reconciler For Widgets that Owns ConfigMaps), unchanged but for
// Options.NewCache, on the real control plane.
func TestOperator_ReconcilesOnKloopsCache(t *testing.T) {
	env := controlPlane.Env(t)
	installWidgetCRD(t, env)

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(widgetsv1.AddToScheme(scheme))
	skipNameValidation := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skipNameValidation},
		NewCache:   kloopcache.NewCache,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mgr.GetCache().(*kloopcache.Cache); !ok {
		t.Fatalf("the manager's cache is a %T", mgr.GetCache())
	}
	if err := (&controller.WidgetReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	await.Run(t, "manager", mgr.Start)

	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, cs, "widgets")
	cl, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	widget := &widgetsv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: widgetsv1.WidgetSpec{Size: 3}}
	if err := cl.Create(t.Context(), widget); err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	cm := await.Object(t, "the Widget's ConfigMap", cms, "w-data", func(cm *corev1.ConfigMap) bool { return cm.Data["size"] == "3" })
	if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != widget.UID {
		t.Errorf("ConfigMap's controller is %v, want the Widget %s", ref, widget.UID)
	}

	// A change of the spec reaches the ConfigMap (For).
	// The reconciler writes the status meanwhile: update the latest.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cl.Get(t.Context(), client.ObjectKeyFromObject(widget), widget); err != nil {
			return err
		}
		widget.Spec.Size = 5
		return cl.Update(t.Context(), widget)
	}); err != nil {
		t.Fatal(err)
	}
	await.Object(t, "the ConfigMap to follow the spec", cms, "w-data", func(cm *corev1.ConfigMap) bool { return cm.Data["size"] == "5" })

	// A change to the owned ConfigMap is undone (Owns).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(t.Context(), "w-data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data["size"] = "tampered"
		_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	await.Object(t, "the ConfigMap to be set right", cms, "w-data", func(cm *corev1.ConfigMap) bool { return cm.Data["size"] == "5" })

	// The status says so, read through the manager's client (the cache).
	var got widgetsv1.Widget
	await.Until(t, "the Widget's status to reflect generation 2", changedEvery(t, mgr), func() bool {
		if err := mgr.GetClient().Get(t.Context(), client.ObjectKeyFromObject(widget), &got); err != nil {
			return false
		}
		return got.Status.ConfigMap == "w-data" && got.Status.ObservedGeneration == got.Generation && got.Generation == 2
	})
}

// changedEvery returns a changed function for await.Until that fires on
// every event of the manager's Widget informer.
func changedEvery(t *testing.T, mgr ctrl.Manager) func() <-chan struct{} {
	inf, err := mgr.GetCache().GetInformer(t.Context(), &widgetsv1.Widget{})
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	if _, err := inf.AddEventHandler(ev); err != nil {
		t.Fatal(err)
	}
	go drain(t.Context(), ev)
	return ev.sig.Changed
}

func drain(ctx context.Context, ev *events) {
	for {
		select {
		case <-ev.adds:
		case <-ev.updates:
		case <-ev.deletes:
		case <-ctx.Done():
			return
		}
	}
}

// installWidgetCRD installs the Widget CRD (what controller-gen would
// write into config/crd) and waits until it is served.
func installWidgetCRD(t *testing.T, env *testenv.Env) {
	t.Helper()
	ext := apiextensions.NewForConfigOrDie(env.Config)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetsv1.GroupVersion.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetsv1.GroupVersion.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: widgetsv1.GroupVersion.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer", Format: "int32"}}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"configMap":          {Type: "string"},
							"observedGeneration": {Type: "integer", Format: "int64"},
						}},
					},
				}},
			}},
		},
	}
	// A second run (go test -count=2) on the shared control plane finds it.
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	await.Object(t, "the Widget CRD to be established", ext.ApiextensionsV1().CustomResourceDefinitions(), crd.Name, func(c *apiextensionsv1.CustomResourceDefinition) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}
