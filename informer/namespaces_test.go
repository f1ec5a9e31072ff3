package informer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/watchtest"
	"github.com/kloop-dev/kloop/watcher"
)

func nsCM(ns, name, uid, rv, app string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv, Labels: map[string]string{"app": app}}}
}

// nsInformer makes a factory informer of configmaps in scope namespaces,
// each namespace listed and watched through its own script in lws.
func nsInformer(t *testing.T, namespaces string, lws map[string]*watchtest.ListerWatcher[*corev1.ConfigMap]) (*Factory, *Informer[*corev1.ConfigMap]) {
	t.Helper()
	f := NewFactory(nil, FactoryOptions{
		Registerer: prometheus.NewRegistry(),
		Watch:      watcher.Options{InitialList: watcher.InitialListPaginated},
	})
	inf, err := OfListerWatcher(f, "configmaps", Scope{Namespace: namespaces}, func(o watcher.Scope) (watcher.ListerWatcher[*corev1.ConfigMap], error) {
		lw, ok := lws[o.Namespace]
		if !ok {
			t.Errorf("asked for namespace %q, which the scope does not name", o.Namespace)
			return nil, errors.New("no such namespace")
		}
		return lw, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, inf
}

// nsEvents records what a handler was told, as "kind ns/name".
type nsEvents struct{ ch chan string }

func newEvents(t *testing.T, inf *Informer[*corev1.ConfigMap]) *nsEvents {
	e := &nsEvents{ch: make(chan string, 100)}
	if _, err := inf.AddHandler(HandlerFunc[*corev1.ConfigMap](func(ev cache.Event[*corev1.ConfigMap]) {
		s := ev.Kind.String() + " " + ev.Key().String()
		if ev.FinalStateUnknown {
			s += " (final state unknown)"
		}
		e.ch <- s
	}), HandlerOptions{Inline: true}); err != nil {
		t.Fatal(err)
	}
	return e
}

// take returns what the handler was told so far, sorted.
func (e *nsEvents) take() []string {
	var out []string
	for {
		select {
		case s := <-e.ch:
			out = append(out, s)
		default:
			slices.Sort(out)
			return out
		}
	}
}

func startFactory(t *testing.T, f *Factory) (context.Context, func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	return ctx, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}
}

func names(objs []*corev1.ConfigMap) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	slices.Sort(out)
	return out
}

func TestInformer_SeveralNamespaces_OneCacheReadsAndHandlersSeeEveryNamespace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lws := map[string]*watchtest.ListerWatcher[*corev1.ConfigMap]{"a": watchtest.New[*corev1.ConfigMap](), "b": watchtest.New[*corev1.ConfigMap]()}
		lws["a"].PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{nsCM("a", "x", "ax", "10", "web")}, ResourceVersion: "10"}, nil)
		wa := lws["a"].PushWatch()
		lws["b"].PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{nsCM("b", "x", "bx", "5", "web"), nsCM("b", "y", "by", "6", "db")}, ResourceVersion: "6"}, nil)
		wb := lws["b"].PushWatch()
		f, inf := nsInformer(t, "b,a", lws)
		if inf.Name() != "configmaps [namespace=a,b]" {
			t.Errorf("Name() = %q, want the namespaces sorted", inf.Name())
		}
		if again, err := OfListerWatcher[*corev1.ConfigMap](f, "configmaps", Scope{Namespace: "a,b"}, nil); err != nil || again != inf {
			t.Errorf("the same set in another order made another informer (%v)", err)
		}
		if err := inf.AddIndex("app", func(cm *corev1.ConfigMap) []string { return []string{cm.Labels["app"]} }); err != nil {
			t.Fatal(err)
		}
		evs := newEvents(t, inf)
		ctx, stop := startFactory(t, f)
		defer stop()
		if err := inf.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		l := inf.Lister()
		if got, ok := l.Get("a", "x"); !ok || got.UID != "ax" {
			t.Errorf("Get(a, x) = %v, %v", got, ok)
		}
		if got, ok := l.Get("b", "x"); !ok || got.UID != "bx" {
			t.Errorf("Get(b, x) = %v, %v: a name in two namespaces must be two objects", got, ok)
		}
		if got := names(l.List(nil)); !slices.Equal(got, []string{"a/x", "b/x", "b/y"}) {
			t.Errorf("List = %v, want the union of the namespaces", got)
		}
		if got := names(l.ListInNamespace("b", nil)); !slices.Equal(got, []string{"b/x", "b/y"}) {
			t.Errorf("ListInNamespace(b) = %v", got)
		}
		if got := names(l.ListInNamespace("", labels.SelectorFromSet(labels.Set{"app": "web"}))); !slices.Equal(got, []string{"a/x", "b/x"}) {
			t.Errorf("List(app=web) = %v", got)
		}
		byIndex, err := l.ByIndex("app", "web")
		if err != nil || !slices.Equal(names(byIndex), []string{"a/x", "b/x"}) {
			t.Errorf("ByIndex(app, web) = %v, %v", names(byIndex), err)
		}
		if got := evs.take(); !slices.Equal(got, []string{"Added a/x", "Added b/x", "Added b/y"}) {
			t.Errorf("handler was told %v of the first snapshot", got)
		}
		// The cache is only as far as its slowest namespace.
		if rv := l.ResourceVersion(); rv != "6" {
			t.Errorf("ResourceVersion() = %q, want 6 (b's, the lower)", rv)
		}

		wb.Modify(nsCM("b", "y", "by", "20", "web"))
		wa.Add(nsCM("a", "z", "az", "12", "db"))
		synctest.Wait()
		if got := evs.take(); !slices.Equal(got, []string{"Added a/z", "Updated b/y"}) {
			t.Errorf("handler was told %v, want the events of both namespaces", got)
		}
		if rv := l.ResourceVersion(); rv != "12" {
			t.Errorf("ResourceVersion() = %q, want 12 (a's, the lower)", rv)
		}
		byIndex, _ = l.ByIndex("app", "web")
		if got := names(byIndex); !slices.Equal(got, []string{"a/x", "b/x", "b/y"}) {
			t.Errorf("ByIndex(app, web) after the update = %v", got)
		}
		if inf.src.LastError() != nil {
			t.Errorf("LastError() = %v, want nil", inf.src.LastError())
		}
	})
}

func TestInformer_SeveralNamespaces_ANamespaceThatCannotBeListedIsNamedAndTheOthersAreServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lws := map[string]*watchtest.ListerWatcher[*corev1.ConfigMap]{"a": watchtest.New[*corev1.ConfigMap](), "locked": watchtest.New[*corev1.ConfigMap]()}
		lws["a"].PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{nsCM("a", "x", "ax", "10", "web")}, ResourceVersion: "10"}, nil)
		lws["a"].PushWatch()
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New(`User "system:serviceaccount:x:y" cannot list resource "configmaps" in the namespace "locked"`))
		lws["locked"].PushList(watcher.ListPage[*corev1.ConfigMap]{}, forbidden)
		f, inf := nsInformer(t, "a,locked", lws)
		evs := newEvents(t, inf)
		ctx, stop := startFactory(t, f)
		defer stop()
		if err := f.WaitForSync(ctx); err != nil {
			t.Fatalf("WaitForSync: %v; want the namespace that can be listed served", err)
		}
		err := inf.src.LastError()
		if err == nil || !strings.Contains(err.Error(), "namespace locked:") || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("LastError() = %v; want it to name namespace locked and say why", err)
		}
		if apierrors.IsForbidden(err) {
			t.Errorf("LastError() is Forbidden while namespace a is served: WaitForSync would give up on the informer")
		}
		if st := inf.Status(); st.Source.LastError == nil || !st.Synced {
			t.Errorf("Status() = %+v; want synced, with the locked namespace's error", st)
		}
		if got := evs.take(); !slices.Equal(got, []string{"Added a/x"}) {
			t.Errorf("handler was told %v", got)
		}

		// Allowed later: its objects come in as adds.
		lws["locked"].PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{nsCM("locked", "y", "ly", "11", "web")}, ResourceVersion: "11"}, nil)
		lws["locked"].PushWatch()
		time.Sleep(time.Minute) // virtual: past the reflector's backoff
		synctest.Wait()
		if got := evs.take(); !slices.Equal(got, []string{"Added locked/y"}) {
			t.Errorf("handler was told %v once the namespace could be listed", got)
		}
		if _, ok := inf.Lister().Get("locked", "y"); !ok {
			t.Error("the namespace's object is not in the cache")
		}
		if err := inf.src.LastError(); err != nil {
			t.Errorf("LastError() = %v once every namespace is served", err)
		}
	})
}

func TestInformer_SeveralNamespaces_EveryNamespaceRefusedFailsWaitForSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("RBAC: access denied"))
		lws := map[string]*watchtest.ListerWatcher[*corev1.ConfigMap]{"a": watchtest.New[*corev1.ConfigMap](), "b": watchtest.New[*corev1.ConfigMap]()}
		for _, lw := range lws {
			for range 20 {
				lw.PushList(watcher.ListPage[*corev1.ConfigMap]{}, forbidden)
			}
		}
		f, inf := nsInformer(t, "a,b", lws)
		ctx, stop := startFactory(t, f)
		defer stop()
		err := inf.WaitForSync(ctx)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "namespace a:") || !strings.Contains(err.Error(), "namespace b:") {
			t.Errorf("WaitForSync = %v; want Forbidden, naming both namespaces", err)
		}
	})
}

func TestInformer_SeveralNamespaces_ANamespaceListedAgainListsThemAllAndDropsWhatIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lws := map[string]*watchtest.ListerWatcher[*corev1.ConfigMap]{"a": watchtest.New[*corev1.ConfigMap](), "b": watchtest.New[*corev1.ConfigMap]()}
		lws["a"].PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{nsCM("a", "x", "ax", "10", "web")}, ResourceVersion: "10"}, nil)
		wa := lws["a"].PushWatch()
		lws["b"].PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{nsCM("b", "x", "bx", "5", "web")}, ResourceVersion: "6"}, nil)
		lws["b"].PushWatch()
		f, inf := nsInformer(t, "a,b", lws)
		evs := newEvents(t, inf)
		ctx, stop := startFactory(t, f)
		defer stop()
		if err := inf.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		evs.take()

		// a's watch expires; meanwhile b/x was deleted and a/x changed.
		// a's reflector lists again, which ends the round: every namespace
		// is listed anew (a twice).
		for range 2 {
			lws["a"].PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{nsCM("a", "x", "ax", "30", "web")}, ResourceVersion: "30"}, nil)
		}
		lws["a"].PushWatch()
		lws["b"].PushList(watcher.ListPage[*corev1.ConfigMap]{ResourceVersion: "31"}, nil)
		lws["b"].PushWatch()
		wa.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
		time.Sleep(time.Minute) // virtual: past any backoff
		synctest.Wait()
		if got := evs.take(); !slices.Equal(got, []string{"Deleted b/x (final state unknown)", "Updated a/x"}) {
			t.Errorf("handler was told %v after the relist", got)
		}
		if got := names(inf.Lister().List(nil)); !slices.Equal(got, []string{"a/x"}) {
			t.Errorf("cache holds %v", got)
		}
	})
}

// render shows merged events as "Type ns/name@rv" (or "Type @rv").
func render(evs []watcher.Event[*corev1.ConfigMap]) []string {
	var out []string
	for _, e := range evs {
		s := e.Type.String() + " "
		if e.Object != nil {
			s += e.Object.Namespace + "/" + e.Object.Name
		}
		out = append(out, s+"@"+e.ResourceVersion)
	}
	return out
}

func TestNSMerge_HoldsEventsUntilEveryNamespaceIsListedAndPassesTheLowestResourceVersion(t *testing.T) {
	m := newNSMerge[*corev1.ConfigMap](3) // 0: a, 1: b, 2: c
	step := func(i int, typ watcher.EventType, obj *corev1.ConfigMap, rv string) []string {
		out, restart := m.step(nsEvent[*corev1.ConfigMap]{i: i, ev: watcher.Event[*corev1.ConfigMap]{Type: typ, Object: obj, ResourceVersion: rv}})
		if restart {
			t.Fatalf("restart after %v of namespace %d", typ, i)
		}
		return render(out)
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", what, got, want)
		}
	}
	check("a starts", step(0, watcher.RelistStart, nil, ""))
	check("a's item", step(0, watcher.RelistItem, nsCM("a", "x", "1", "10", ""), "10"))
	check("a's listing starts again", step(0, watcher.RelistStart, nil, ""))
	check("a's item again", step(0, watcher.RelistItem, nsCM("a", "y", "2", "11", ""), "11"))
	check("a listed: its items, no end yet", step(0, watcher.RelistDone, nil, "12"), "RelistItem a/y@11")
	check("a's watch event is held while b lists", step(0, watcher.Modified, nsCM("a", "y", "2", "13", ""), "13"))
	check("b starts", step(1, watcher.RelistStart, nil, ""))
	check("b listed", step(1, watcher.RelistDone, nil, "8"))
	out, _ := m.step(nsEvent[*corev1.ConfigMap]{i: 2, failed: true})
	check("c fails: the merged snapshot ends, then what was held", render(out), "RelistDone @8", "Modified a/y@8")
	check("b's event", step(1, watcher.Added, nsCM("b", "z", "3", "20", ""), "20"), "Added b/z@13")
	check("c listed at last: adds only", func() []string {
		step(2, watcher.RelistStart, nil, "")
		step(2, watcher.RelistItem, nsCM("c", "w", "4", "5", ""), "5")
		return step(2, watcher.RelistDone, nil, "6")
	}(), "Added c/w@6")
	if _, restart := m.step(nsEvent[*corev1.ConfigMap]{i: 1, ev: watcher.Event[*corev1.ConfigMap]{Type: watcher.RelistStart}}); !restart {
		t.Error("a served namespace listed again: want every namespace listed again")
	}
}
