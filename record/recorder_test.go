package record_test

import (
	"context"
	"fmt"

	"github.com/kloop-dev/kloop/internal/testwait"

	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	testwait.CRDServed(t, env.Config, crd.Name)
}

// startRecorder runs a recorder until the test ends.
func startRecorder(t *testing.T, env *testenv.Env, opts record.Options) (*record.Recorder, func()) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
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

// eventsAbout lists the events.k8s.io/v1 Events about the object with uid.
func eventsAbout(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, uid types.UID) []eventsv1.Event {
	t.Helper()
	list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.UID == uid {
			out = append(out, ev)
		}
	}
	return out
}

// waitForEvents waits until cond holds for the events about uid, checking
// again on every change to the namespace's events.
func waitForEvents(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, uid types.UID, what string, cond func([]eventsv1.Event) bool) []eventsv1.Event {
	t.Helper()
	var evs []eventsv1.Event
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen %d events about %s: %+v", len(evs), uid, evs)
		}
	})
	await.Watched(t, what, cs.EventsV1().Events(ns), metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
		evs = eventsAbout(ctx, t, cs, ns, uid)
		return cond(evs), nil
	})
	return evs
}

// occurrences is how many times ev happened: its series' count, or 1.
func occurrences(ev eventsv1.Event) int32 {
	if ev.Series != nil {
		return ev.Series.Count
	}
	return 1
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
		r.Event(cm, record.Warning, "SyncFailed", fmt.Sprintf("could not sync %s: %s", cm.Name, "boom"))
		evs := waitForEvents(ctx, t, cs, "default", cm.UID, "the event", func(e []eventsv1.Event) bool { return len(e) == 1 })
		ev := evs[0]
		want := corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "described", UID: cm.UID, ResourceVersion: cm.ResourceVersion}
		if ev.Regarding != want || ev.Related != nil {
			t.Errorf("regarding %+v related %v\nwant %+v, nothing related", ev.Regarding, ev.Related, want)
		}
		if ev.Type != corev1.EventTypeWarning || ev.Reason != "SyncFailed" || ev.Action != "SyncFailed" || ev.Note != "could not sync described: boom" || ev.Series != nil {
			t.Errorf("type %q reason %q action %q note %q series %+v; want a singleton Warning", ev.Type, ev.Reason, ev.Action, ev.Note, ev.Series)
		}
		if ev.ReportingController != "test-controller" || ev.ReportingInstance != "node-1" || ev.EventTime.IsZero() {
			t.Errorf("reporting %q/%q, eventTime %v", ev.ReportingController, ev.ReportingInstance, ev.EventTime)
		}
		// core/v1 readers (kubectl describe, older tools) see the same Event.
		core, err := cs.CoreV1().Events("default").Get(ctx, ev.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Event through core/v1: %v", err)
		}
		if core.InvolvedObject.UID != cm.UID || core.Reason != "SyncFailed" || core.Message != ev.Note || core.ReportingController != "test-controller" {
			t.Errorf("through core/v1: involvedObject %s reason %q message %q reportingComponent %q", core.InvolvedObject.UID, core.Reason, core.Message, core.ReportingController)
		}
	})

	t.Run("ThreeRecordingsAreOneEventWhoseSeriesCountsThree", func(t *testing.T) {
		r, _ := startRecorder(t, env, record.Options{Component: "test-controller"})
		cm := newConfigMap(t, "thrice")
		// Each on its own, so the second starts a series on the stored
		// Event and the third moves it on, rather than being folded in
		// before the Event is created.
		for i := int32(1); i <= 3; i++ {
			r.Event(cm, record.Normal, "Synced", "synced")
			waitForEvents(ctx, t, cs, "default", cm.UID, fmt.Sprintf("occurrence %d written", i), func(e []eventsv1.Event) bool {
				return len(e) >= 1 && occurrences(e[0]) >= i
			})
		}
		evs := eventsAbout(ctx, t, cs, "default", cm.UID)
		if len(evs) != 1 || evs[0].Series == nil || evs[0].Series.Count != 3 {
			t.Fatalf("%d events, the first with series %+v; want one Event with series.count 3", len(evs), evs[0].Series)
		}
		if s := evs[0].Series; s.LastObservedTime.Before(&evs[0].EventTime) {
			t.Errorf("series.lastObservedTime %v before eventTime %v", s.LastObservedTime, evs[0].EventTime)
		}
		// Through core/v1 the series shows as the series, not as a count.
		core, err := cs.CoreV1().Events("default").Get(ctx, evs[0].Name, metav1.GetOptions{})
		if err != nil || core.Series == nil || core.Series.Count != 3 {
			t.Fatalf("through core/v1: %+v (%v), want series.count 3", core, err)
		}
	})

	t.Run("TenRepeatsAreOneEventWithSeriesCountTen", func(t *testing.T) {
		r, _ := startRecorder(t, env, record.Options{})
		cm := newConfigMap(t, "repeated")
		r.Event(cm, record.Normal, "Synced", "synced")
		waitForEvents(ctx, t, cs, "default", cm.UID, "the first event", func(e []eventsv1.Event) bool { return len(e) == 1 })
		for range 9 {
			r.Event(cm, record.Normal, "Synced", "synced")
		}
		evs := waitForEvents(ctx, t, cs, "default", cm.UID, "count 10", func(e []eventsv1.Event) bool { return len(e) >= 1 && occurrences(e[0]) >= 10 })
		if len(evs) != 1 || occurrences(evs[0]) != 10 {
			t.Fatalf("%d events, first with count %d; want one event with count 10", len(evs), occurrences(evs[0]))
		}
		// A different message is a different event.
		r.Event(cm, record.Normal, "Synced", "synced again, differently")
		waitForEvents(ctx, t, cs, "default", cm.UID, "a second event", func(e []eventsv1.Event) bool { return len(e) == 2 })
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

		evs := waitForEvents(ctx, t, cs, "default", g.UID, "the gadget's event", func(e []eventsv1.Event) bool { return len(e) == 1 })
		io := evs[0].Regarding
		if io.APIVersion != "test.kloop.dev/v1" || io.Kind != "Gadget" || io.Name != "g" || io.Namespace != "default" {
			t.Errorf("regarding %+v, want test.kloop.dev/v1 Gadget default/g", io)
		}
		// Events about cluster-scoped objects go to the default namespace.
		evs = waitForEvents(ctx, t, cs, "default", ns.UID, "the namespace's event", func(e []eventsv1.Event) bool { return len(e) == 1 })
		if io := evs[0].Regarding; io.Kind != "Namespace" || io.Namespace != "" || io.Name != "default" {
			t.Errorf("regarding %+v, want the Namespace default", io)
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

// An API server without events.k8s.io/v1 gets core/v1 Events, repeats in
// their count: the recorder asks discovery once, at Start.
func TestAgainstAPIServerWithoutEventsV1(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{APIServerFlags: []string{"--runtime-config=events.k8s.io/v1=false"}})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("events.k8s.io/v1 list: %v, want NotFound from a server without it", err)
	}
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old-server"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := startRecorder(t, env, record.Options{Component: "test-controller", Host: "node-1"})
	var evs []corev1.Event
	// until waits for cond to hold of the core/v1 Events about cm.
	until := func(what string, cond func() bool) {
		t.Helper()
		await.Watched(t, what, cs.CoreV1().Events("default"), metav1.ListOptions{}, func(ctx context.Context) (bool, error) {
			l, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(cm.UID)})
			if err != nil {
				return false, err
			}
			evs = l.Items
			return cond(), nil
		})
	}
	r.Event(cm, record.Normal, "Synced", "synced")
	until("the core/v1 Event", func() bool { return len(evs) == 1 })
	r.Event(cm, record.Normal, "Synced", "synced")
	until("its count at 2", func() bool { return len(evs) >= 1 && evs[0].Count >= 2 })
	if ev := evs[0]; len(evs) != 1 || ev.Count != 2 || ev.Source.Component != "test-controller" || ev.Source.Host != "node-1" || ev.Series != nil {
		t.Fatalf("%d events, the first %+v; want one core/v1 Event with count 2 from test-controller on node-1", len(evs), ev)
	}
}
