package record_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/record"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// Gadget is a custom resource of the tests, with a hand-written deep copy.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

func (g *Gadget) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (l *GadgetList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Gadget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Gadget)
	}
	return &out
}

var gadgetGV = schema.GroupVersion{Group: "test.kloop.dev", Version: "v1"}

func gadgetScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(gadgetGV, &Gadget{}, &GadgetList{})
	metav1.AddToGroupVersion(s, gadgetGV)
	return s
}

func installGadgetCRD(ctx context.Context, t *testing.T, env *testenv.Env) {
	t.Helper()
	cs, err := apiextensions.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + gadgetGV.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgetGV.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Gadget CRD: %v", err)
	}
	await.CRDServed(t, env.Config, crd.Name)
}

// startRecorder runs a recorder until the test ends.
func startRecorder(t *testing.T, env *testenv.Env, opts record.Options) (*record.Recorder, func()) {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Registerer = prometheus.NewRegistry()
	r, err := record.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start = %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Start did not return within 30s of cancel")
		}
	}
	t.Cleanup(stop)
	return r, stop
}

// eventsAbout lists the events whose involved object has uid.
func eventsAbout(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, uid types.UID) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return list.Items
}

// waitForEvents waits until cond holds for the events about uid, checking
// again on every change to them.
func waitForEvents(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, uid types.UID, what string, cond func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	var evs []corev1.Event
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen %d events about %s: %+v", len(evs), uid, evs)
		}
	})
	about := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(uid)).String()}
	await.Watched(t, what, cs.CoreV1().Events(ns), about, func(ctx context.Context) (bool, error) {
		evs = eventsAbout(ctx, t, cs, ns, uid)
		return cond(evs), nil
	})
	return evs
}

func TestAgainstAPIServer(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	installGadgetCRD(ctx, t, env)
	newConfigMap := func(t *testing.T, name string) *corev1.ConfigMap {
		cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().ConfigMaps("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		return cm
	}

	t.Run("EventAboutAnObjectCarriesItsReferenceReasonMessageAndType", func(t *testing.T) {
		r, _ := startRecorder(t, env, record.Options{Component: "test-controller", Host: "node-1"})
		cm := newConfigMap(t, "described")
		r.Eventf(cm, record.Warning, "SyncFailed", "could not sync %s: %s", cm.Name, "boom")
		evs := waitForEvents(ctx, t, cs, "default", cm.UID, "the event", func(e []corev1.Event) bool { return len(e) == 1 })
		ev := evs[0]
		want := corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "described", UID: cm.UID, ResourceVersion: cm.ResourceVersion}
		if ev.InvolvedObject != want {
			t.Errorf("involvedObject %+v\nwant %+v", ev.InvolvedObject, want)
		}
		if ev.Type != corev1.EventTypeWarning || ev.Reason != "SyncFailed" || ev.Message != "could not sync described: boom" || ev.Count != 1 {
			t.Errorf("type %q reason %q message %q count %d", ev.Type, ev.Reason, ev.Message, ev.Count)
		}
		if ev.Source.Component != "test-controller" || ev.Source.Host != "node-1" || ev.FirstTimestamp.IsZero() || ev.LastTimestamp.IsZero() {
			t.Errorf("source %+v, first %v, last %v", ev.Source, ev.FirstTimestamp, ev.LastTimestamp)
		}
	})

	t.Run("TenRepeatsAreOneEventWithCountTen", func(t *testing.T) {
		r, _ := startRecorder(t, env, record.Options{})
		cm := newConfigMap(t, "repeated")
		// The first one on its own, so the rest must update the stored
		// Event rather than be folded in before it is created.
		r.Event(cm, record.Normal, "Synced", "synced")
		waitForEvents(ctx, t, cs, "default", cm.UID, "the first event", func(e []corev1.Event) bool { return len(e) == 1 })
		for range 9 {
			r.Event(cm, record.Normal, "Synced", "synced")
		}
		evs := waitForEvents(ctx, t, cs, "default", cm.UID, "count 10", func(e []corev1.Event) bool { return len(e) >= 1 && e[0].Count >= 10 })
		if len(evs) != 1 || evs[0].Count != 10 {
			t.Fatalf("%d events, first with count %d; want one event with count 10", len(evs), evs[0].Count)
		}
		if evs[0].LastTimestamp.Before(&evs[0].FirstTimestamp) {
			t.Errorf("lastTimestamp %v before firstTimestamp %v", evs[0].LastTimestamp, evs[0].FirstTimestamp)
		}
		// A different message is a different event.
		r.Event(cm, record.Normal, "Synced", "synced again, differently")
		waitForEvents(ctx, t, cs, "default", cm.UID, "a second event", func(e []corev1.Event) bool { return len(e) == 2 })
	})

	t.Run("InvolvedObjectCanBeACustomResourceOrClusterScoped", func(t *testing.T) {
		r, _ := startRecorder(t, env, record.Options{Scheme: gadgetScheme(t)})
		c, err := client.New(env.Config, client.Options{Scheme: gadgetScheme(t), DisableWriteTracking: true})
		if err != nil {
			t.Fatal(err)
		}
		gadgets, err := client.NewResource[*Gadget](c, gadgetGV.WithResource("gadgets"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := gadgets.Create(ctx, &Gadget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g"}})
		if err != nil {
			t.Fatalf("create gadget: %v", err)
		}
		t.Cleanup(func() { _ = gadgets.Delete(context.Background(), "default", "g", metav1.DeleteOptions{}) })
		r.Event(g, record.Normal, "Built", "gadget built")

		ns, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Event(ns, record.Normal, "Noticed", "a cluster-scoped object")

		evs := waitForEvents(ctx, t, cs, "default", g.UID, "the gadget's event", func(e []corev1.Event) bool { return len(e) == 1 })
		io := evs[0].InvolvedObject
		if io.APIVersion != "test.kloop.dev/v1" || io.Kind != "Gadget" || io.Name != "g" || io.Namespace != "default" {
			t.Errorf("involvedObject %+v, want test.kloop.dev/v1 Gadget default/g", io)
		}
		// Events about cluster-scoped objects go to the default namespace.
		evs = waitForEvents(ctx, t, cs, "default", ns.UID, "the namespace's event", func(e []corev1.Event) bool { return len(e) == 1 })
		if io := evs[0].InvolvedObject; io.Kind != "Namespace" || io.Namespace != "" || io.Name != "default" {
			t.Errorf("involvedObject %+v, want the Namespace default", io)
		}
	})

	t.Run("QueuedEventsAreWrittenWhenStartStops", func(t *testing.T) {
		r, stop := startRecorder(t, env, record.Options{})
		cm := newConfigMap(t, "drained")
		reasons := []string{"One", "Two", "Three", "Four", "Five"}
		for _, reason := range reasons {
			r.Event(cm, record.Normal, reason, "m")
		}
		stop() // returns after the queue is drained
		evs := eventsAbout(ctx, t, cs, "default", cm.UID)
		if len(evs) != len(reasons) {
			t.Fatalf("%d events after Start returned, want %d (the queue drained)", len(evs), len(reasons))
		}
	})
}
