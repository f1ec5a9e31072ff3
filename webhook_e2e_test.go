package kloop_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/manifest"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/webhook"
)

// startStoppable runs app until stop is called (or the test ends) and
// returns stop, which waits for Run to return nil.
func startStoppable(t *testing.T, app *kloop.App) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := testwait.Receive(t, "App.Run to return after the stop", done); err != nil {
				t.Errorf("App.Run = %v, want nil after the stop", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// warnings collects the warnings the API server sends a client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

// configMapRules: data key "forbidden" may not be created, key "frozen"
// may not change, key "warn" draws a warning.
type configMapRules struct{}

var configMapKind = schema.GroupKind{Kind: "ConfigMap"}

func (configMapRules) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (webhook.Warnings, error) {
	var w webhook.Warnings
	if _, ok := cm.Data["warn"]; ok {
		w = append(w, "data.warn is deprecated")
	}
	if _, ok := cm.Data["forbidden"]; ok {
		return w, apierrors.NewInvalid(configMapKind, cm.Name, field.ErrorList{field.Forbidden(field.NewPath("data", "forbidden"), "this key may not be set")})
	}
	return w, nil
}

func (configMapRules) ValidateUpdate(_ context.Context, oldCM, newCM *corev1.ConfigMap) (webhook.Warnings, error) {
	if oldCM.Data["frozen"] != newCM.Data["frozen"] {
		return nil, apierrors.NewInvalid(configMapKind, newCM.Name, field.ErrorList{field.Invalid(field.NewPath("data", "frozen"), newCM.Data["frozen"], "frozen may not change")})
	}
	return nil, nil
}

func (configMapRules) ValidateDelete(context.Context, *corev1.ConfigMap) (webhook.Warnings, error) {
	return nil, nil
}

func defaultConfigMap(_ context.Context, cm *corev1.ConfigMap) error {
	if _, ok := cm.Data["panic"]; ok {
		panic("the defaulter panics on purpose")
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	if cm.Labels["tier"] == "" {
		cm.Labels["tier"] = "defaulted"
	}
	return nil
}

// The API server itself calls the App's webhooks, installed in local mode:
// defaults are stored, refusals carry the validator's field errors,
// warnings reach the client, a panic is a refusal, and the configurations
// are gone after the stop.
func TestWebhook_LocalModeDefaultsValidatesWarnsAndRemovesItsConfigurations(t *testing.T) {
	env := controlPlane.Env(t)
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, admin, "webhook")
	app, err := kloop.New(env.Config, kloop.Options{Name: ns, Namespace: ns, Logger: quiet(), WebhookLocal: true, WebhookAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app)
	if err := kloop.NewWebhook(app, cms).Defaulter(defaultConfigMap).Validator(configMapRules{}).Complete(); err != nil {
		t.Fatal(err)
	}
	stop := startStoppable(t, app)
	testwait.Closed(t, "the API server to call the local webhooks", app.WebhooksReady())

	var warned warnings
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = &warned
	kc := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns)
	ctx := t.Context()
	create := func(name string, data map[string]string) (*corev1.ConfigMap, error) {
		return kc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
	}

	if _, err := create("plain", map[string]string{"k": "v"}); err != nil {
		t.Fatalf("create plain: %v", err)
	}
	if got, err := kc.Get(ctx, "plain", metav1.GetOptions{}); err != nil || got.Labels["tier"] != "defaulted" || got.Data["k"] != "v" {
		t.Errorf("stored plain = %+v, %v; want label tier=defaulted and data k=v", got, err)
	}

	_, err = create("bad", map[string]string{"forbidden": "x"})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `ConfigMap "bad" is invalid: data.forbidden: Forbidden: this key may not be set`) {
		t.Errorf("create bad = %v, want Invalid with the validator's field error", err)
	}
	if _, err := kc.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get bad = %v, want NotFound", err)
	}

	if _, err := create("frozen", map[string]string{"frozen": "a"}); err != nil {
		t.Fatalf("create frozen: %v", err)
	}
	cm, err := kc.Get(ctx, "frozen", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["frozen"] = "b"
	if _, err := kc.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "data.frozen: Invalid value: \"b\": frozen may not change") {
		t.Errorf("update frozen = %v, want Invalid naming data.frozen", err)
	}
	if got, err := kc.Get(ctx, "frozen", metav1.GetOptions{}); err != nil || got.Data["frozen"] != "a" || got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("stored frozen = %v (rv %s), %v; want it unchanged: a at rv %s", got.Data, got.ResourceVersion, err, cm.ResourceVersion)
	}

	if _, err := create("warned", map[string]string{"warn": "1"}); err != nil {
		t.Fatalf("create warned: %v", err)
	}
	if !strings.Contains(warned.all(), "data.warn is deprecated") {
		t.Errorf("warnings %q, want the validator's", warned.all())
	}

	_, err = create("panics", map[string]string{"panic": "1"})
	if err == nil || !strings.Contains(err.Error(), "the defaulter panics on purpose") {
		t.Errorf("create panics = %v, want a refusal naming the panic", err)
	}
	if se, ok := err.(apierrors.APIStatus); !ok || se.Status().Code != 500 {
		t.Errorf("create panics = %#v, want code 500", err)
	}

	if err := kc.Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete plain (allowed by the validator): %v", err)
	}

	stop()
	reg := admin.AdmissionregistrationV1()
	if _, err := reg.MutatingWebhookConfigurations().Get(ctx, ns+"-local", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the stop, get MutatingWebhookConfiguration %s-local = %v, want NotFound", ns, err)
	}
	if _, err := reg.ValidatingWebhookConfigurations().Get(ctx, ns+"-local", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the stop, get ValidatingWebhookConfiguration %s-local = %v, want NotFound", ns, err)
	}
	if _, err := create("after", map[string]string{"forbidden": "x"}); err != nil {
		t.Errorf("after the stop, a create the validator would refuse = %v, want it stored (no webhook left)", err)
	}
}

// Widget is a tiny custom resource in two versions: v1 (storage, the Hub)
// has spec.size, v2 calls it spec.replicas.
var (
	widgetsV1 = schema.GroupVersion{Group: "webhooks.kloop.dev", Version: "v1"}
	widgetsV2 = schema.GroupVersion{Group: "webhooks.kloop.dev", Version: "v2"}
)

type WidgetV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size,omitempty"`
	} `json:"spec,omitempty"`
}

func (w *WidgetV1) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}
func (*WidgetV1) Hub() {}

type WidgetV1List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WidgetV1 `json:"items"`
}

func (l *WidgetV1List) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = make([]WidgetV1, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*WidgetV1)
	}
	return &c
}

type WidgetV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Replicas int `json:"replicas,omitempty"`
	} `json:"spec,omitempty"`
}

func (w *WidgetV2) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func (w *WidgetV2) ConvertTo(dst webhook.Hub) error {
	h := dst.(*WidgetV1)
	w.ObjectMeta.DeepCopyInto(&h.ObjectMeta)
	h.Spec.Size = w.Spec.Replicas
	return nil
}

func (w *WidgetV2) ConvertFrom(src webhook.Hub) error {
	h := src.(*WidgetV1)
	h.ObjectMeta.DeepCopyInto(&w.ObjectMeta)
	w.Spec.Replicas = h.Spec.Size
	return nil
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.webhooks.kloop.dev
spec:
  group: webhooks.kloop.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {replicas: {type: integer}}}
`

// A CRD with a renamed field between its versions converts through the
// App's conversion webhook, installed in local mode: written as v2, read
// as v1 from the server, read back as v2 unchanged; after the stop the
// CRD's conversion is None again.
func TestWebhook_LocalModeConvertsACustomResourceBetweenVersions(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, admin, "convert")
	if err := manifest.InstallCRD(ctx, env.Config, []byte(widgetCRD)); err != nil {
		t.Fatal(err)
	}
	testwait.CRDServed(t, env.Config, "widgets.webhooks.kloop.dev")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	scheme.AddKnownTypeWithName(widgetsV1.WithKind("Widget"), &WidgetV1{})
	scheme.AddKnownTypeWithName(widgetsV1.WithKind("WidgetList"), &WidgetV1List{})
	scheme.AddKnownTypeWithName(widgetsV2.WithKind("Widget"), &WidgetV2{})
	metav1.AddToGroupVersion(scheme, widgetsV1)
	metav1.AddToGroupVersion(scheme, widgetsV2)

	app, err := kloop.New(env.Config, kloop.Options{Name: ns, Namespace: ns, Scheme: scheme, Logger: quiet(), WebhookLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	widgets := kloop.Objects[*WidgetV1](app, kloop.ObjectsOptions{Resource: widgetsV1.WithResource("widgets")})
	if err := kloop.NewWebhook(app, widgets).Conversion().Complete(); err != nil {
		t.Fatal(err)
	}
	stop := startStoppable(t, app)
	testwait.Closed(t, "the API server to call the local conversion webhook", app.WebhooksReady())

	dyn := dynamic.NewForConfigOrDie(env.Config)
	v2 := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": widgetsV2.String(), "kind": "Widget",
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"replicas": int64(3)},
	}}
	if _, err := dyn.Resource(widgetsV2.WithResource("widgets")).Namespace(ns).Create(ctx, v2, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create v2: %v", err)
	}
	asV1, err := dyn.Resource(widgetsV1.WithResource("widgets")).Namespace(ns).Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(asV1.Object, "spec", "size"); size != 3 {
		t.Errorf("read as v1: spec %v, want size 3", asV1.Object["spec"])
	}
	asV2, err := dyn.Resource(widgetsV2.WithResource("widgets")).Namespace(ns).Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(asV2.Object, "spec", "replicas"); r != 3 || asV2.GetAPIVersion() != widgetsV2.String() {
		t.Errorf("read back as v2: %s spec %v, want %s replicas 3", asV2.GetAPIVersion(), asV2.Object["spec"], widgetsV2)
	}

	stop()
	crd, err := apiextensions.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.webhooks.kloop.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := crd.Spec.Conversion; c == nil || c.Strategy != "None" {
		t.Errorf("after the stop the CRD's conversion is %+v, want strategy None", c)
	}
}
