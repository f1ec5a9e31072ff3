package controller_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
)

// keyChan is a Reconciler that reports every key it is given.
type keyChan chan cache.Key

func (c keyChan) Reconcile(ctx context.Context, k cache.Key) (controller.Result, error) {
	select {
	case c <- k:
	case <-ctx.Done():
	}
	return controller.Result{}, nil
}

// expectKey waits for the next reconciled key and checks it.
func expectKey(t *testing.T, ch keyChan, want cache.Key, why string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("%s: reconciled %v, want %v", why, got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: %v not reconciled within 30s", why, want)
	}
}

// running starts a factory and controllers and stops them in t.Cleanup.
func running(t *testing.T, f *informer.Factory, runs ...func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range append([]func(context.Context) error{f.Start}, runs...) {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestOwns_EndToEnd_EnqueuesOwnerOfChangedDeletedAndRelistDeletedObjects(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "owns-e2e")
	ctx := t.Context()

	owner, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(name, apiVersion, kind, ownerName string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: ownerName, UID: owner.UID, Controller: ptr.To(true),
		}}}}
	}
	for _, s := range []*corev1.Secret{
		secret("owned", "v1", "ConfigMap", "owner-1"),
		secret("owned-2", "v1", "ConfigMap", "owner-1"),
		secret("foreign", "apps/v1", "Deployment", "not-a-configmap"),
	} {
		if _, err := kc.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	f := informer.NewFactory(e.Config, informer.FactoryOptions{Registerer: reg, Logger: quietLogger()})
	cms, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := informer.Of[*corev1.Secret](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var tombstones atomic.Int32
	countTombstones := func(ev cache.Event[*corev1.Secret]) bool {
		if ev.Kind == cache.Deleted && ev.FinalStateUnknown {
			tombstones.Add(1)
		}
		return true
	}
	keysSeen := make(keyChan, 100)
	c, err := controller.New[cache.Key](keysSeen, controller.Options[cache.Key]{Name: "owns-e2e", Registerer: reg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// Only owner-1 is a primary object of interest: other ConfigMaps in the
	// namespace (kube-root-ca.crt) are filtered out.
	if err := c.Watch(controller.For(cms, controller.Filter(func(cm *corev1.ConfigMap) bool { return cm.Name == "owner-1" }))); err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(controller.Owns(secrets, schema.GroupKind{Kind: "ConfigMap"}, countTombstones)); err != nil {
		t.Fatal(err)
	}
	running(t, f, c.Start)

	ownerKey := cache.Key{Namespace: ns, Name: "owner-1"}
	// The initial lists enqueue owner-1 (itself and through its secrets),
	// folded into one or more reconciles; the foreign secret maps to nothing.
	expectKey(t, keysSeen, ownerKey, "initial list")

	// Every later key must be owner-1: a marker change of an owned secret
	// after the foreign change proves the foreign one was handled first.
	drain := func() {
		for {
			select {
			case k := <-keysSeen:
				if k != ownerKey {
					t.Fatalf("reconciled %v; only %v may be reconciled", k, ownerKey)
				}
			default:
				return
			}
		}
	}
	touch := func(name string) {
		t.Helper()
		s, err := kc.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Labels = map[string]string{"touched": fmt.Sprint(time.Now().UnixNano())}
		if _, err := kc.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Let the initial reconciles settle: the informer delivers in order, so
	// once a change made now is seen, the initial events are all handled.
	touch("owned")
	expectKey(t, keysSeen, ownerKey, "change of an owned secret")
	drain()

	touch("foreign")
	touch("owned")
	expectKey(t, keysSeen, ownerKey, "change of an owned secret after a foreign change")
	drain()

	if err := kc.CoreV1().Secrets(ns).Delete(ctx, "owned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectKey(t, keysSeen, ownerKey, "delete of an owned secret")
	drain()

	// A delete the informer cannot see: remove owned-2 from etcd while the
	// API server is down. The restarted server no longer has the history
	// the informer's watch asks for, so the informer relists and finds
	// owned-2 gone: a delete with final state unknown.
	e.StopAPIServer()
	etcdDelete(t, e.EtcdURL, "/registry/secrets/"+ns+"/owned-2")
	if err := e.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	expectKey(t, keysSeen, ownerKey, "delete seen only through a relist")
	if n := tombstones.Load(); n != 1 {
		t.Errorf("saw %d deletes with FinalStateUnknown, want 1", n)
	}
}

// etcdDelete deletes one key through etcd's HTTP gateway.
func etcdDelete(t *testing.T, etcdURL, key string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	resp, err := http.Post(etcdURL+"/v3/kv/deleterange", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"deleted":"1"`) {
		t.Fatalf("etcd delete %s: %s %s", key, resp.Status, out)
	}
}

// childMaker reconciles a parent ConfigMap by making sure one child
// ConfigMap (generated name, label parent=<name>) exists.
type childMaker struct {
	cms      *client.Resource[*corev1.ConfigMap]
	children func(ctx context.Context, ns string, sel labels.Selector) ([]*corev1.ConfigMap, error)
	creates  atomic.Int32
	done     chan struct{}
}

func (m *childMaker) Reconcile(ctx context.Context, k cache.Key) (controller.Result, error) {
	defer func() { m.done <- struct{}{} }()
	kids, err := m.children(ctx, k.Namespace, labels.SelectorFromSet(labels.Set{"parent": k.Name}))
	if err != nil {
		return controller.Result{}, err
	}
	if len(kids) > 0 {
		return controller.Result{}, nil
	}
	_, err = m.cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: k.Namespace, GenerateName: k.Name + "-child-", Labels: map[string]string{"parent": k.Name},
	}})
	if err == nil {
		m.creates.Add(1)
	}
	return controller.Result{}, err
}

// runChildMaker runs childMaker under a burst of triggers that starts
// right after its first create, and returns how many children exist.
func runChildMaker(t *testing.T, readYourWrites bool) int {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	name := "ryw-off"
	if readYourWrites {
		name = "ryw-on"
	}
	ns := testenv.NewNamespace(t, kc, name)
	reg := prometheus.NewRegistry()
	f := informer.NewFactory(e.Config, informer.FactoryOptions{Registerer: reg, Logger: quietLogger()})
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(e.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms, err := client.NewResource[*corev1.ConfigMap](cl, corev1.SchemeGroupVersion.WithResource("configmaps"))
	if err != nil {
		t.Fatal(err)
	}
	m := &childMaker{cms: cms, done: make(chan struct{}, 1000)}
	if readYourWrites {
		reader := cms.Cached(inf.Lister(), client.ReaderOptions{Logger: quietLogger()})
		m.children = reader.List
	} else {
		lister := inf.Lister()
		m.children = func(_ context.Context, ns string, sel labels.Selector) ([]*corev1.ConfigMap, error) {
			return lister.ListInNamespace(ns, sel), nil
		}
	}
	c, err := controller.New[cache.Key](m, controller.Options[cache.Key]{Name: name, Registerer: reg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	isParent := controller.Filter(func(cm *corev1.ConfigMap) bool { return cm.Name == "parent" })
	if err := c.Watch(controller.For(inf, isParent)); err != nil {
		t.Fatal(err)
	}
	running(t, f, c.Start)

	ctx := t.Context()
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The burst: each reconcile that ends is followed at once by another
	// trigger, 20 times, starting with the reconcile that created the child.
	parent := cache.Key{Namespace: ns, Name: "parent"}
	for i := range 20 {
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("reconcile %d did not happen within 30s", i+1)
		}
		c.Enqueue(parent)
	}
	list, err := kc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "parent=parent"})
	if err != nil {
		t.Fatal(err)
	}
	if int(m.creates.Load()) != len(list.Items) {
		t.Errorf("reconciler counted %d creates, API server has %d children", m.creates.Load(), len(list.Items))
	}
	return len(list.Items)
}

func TestReadYourWrites_BurstOfTriggersAfterCreateMakesExactlyOneChild(t *testing.T) {
	if n := runChildMaker(t, true); n != 1 {
		t.Errorf("%d children created, want exactly 1", n)
	}
}

// Without read-your-writes, the reconcile right after the create reads a
// cache that has not seen the child yet and makes another. The outcome
// depends on timing, so this test only reports it; it documents the race
// the test above shows is closed.
func TestReadYourWrites_WithoutItTheBurstIsRacy(t *testing.T) {
	n := runChildMaker(t, false)
	if n < 1 {
		t.Fatalf("%d children, want at least 1", n)
	}
	t.Logf("without read-your-writes: %d children from one parent (1 means the cache happened to win the race)", n)
}
