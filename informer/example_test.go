package informer_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

// scripted is a Source that plays a snapshot, then the rest of its stream
// once next is closed.
type scripted struct {
	snapshot, rest []watcher.Event[*corev1.ConfigMap]
	next           chan struct{}
}

func (s scripted) Run(ctx context.Context, emit func(watcher.Event[*corev1.ConfigMap])) error {
	for _, e := range s.snapshot {
		emit(e)
	}
	select {
	case <-s.next:
		for _, e := range s.rest {
			emit(e)
		}
	case <-ctx.Done():
	}
	<-ctx.Done()
	return nil
}

func (scripted) LastError() error { return nil }

func configMap(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv}}
}

// An informer over a scripted stream; against a real API server the Source
// is a watcher.Reflector, which informer.Factory sets up.
func Example() {
	src := scripted{
		snapshot: []watcher.Event[*corev1.ConfigMap]{
			{Type: watcher.RelistStart},
			{Type: watcher.RelistItem, Object: configMap("a", "1")},
			{Type: watcher.RelistDone, ResourceVersion: "1"},
		},
		rest: []watcher.Event[*corev1.ConfigMap]{
			{Type: watcher.Added, Object: configMap("b", "2")},
			{Type: watcher.Deleted, Object: configMap("a", "3")},
		},
		next: make(chan struct{}),
	}
	inf, err := informer.New[*corev1.ConfigMap](src, informer.Options[*corev1.ConfigMap]{Name: "configmaps", Registerer: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	reg, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
		AddFunc: func(cm *corev1.ConfigMap, initial bool) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("add %s initial=%v", cm.Name, initial))
		},
		DeleteFunc: func(obj *corev1.ConfigMap, finalStateUnknown bool) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("delete %s unknown=%v", obj.Name, finalStateUnknown))
			close(done)
		},
	}, informer.HandlerOptions{Name: "printer"})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan error)
	go func() { stopped <- inf.Start(ctx) }()
	if err := reg.WaitForSync(ctx); err != nil {
		panic(err)
	}
	close(src.next) // the watch goes on
	<-done
	_ = inf.Lister().WaitFor(ctx, cache.Key{Namespace: "demo", Name: "b"}, "3")
	names := []string{}
	for _, cm := range inf.Lister().List(nil) {
		names = append(names, cm.Name)
	}
	cancel()
	<-stopped

	mu.Lock()
	sort.Strings(seen)
	fmt.Println(seen)
	mu.Unlock()
	fmt.Println("cached:", names, "at resourceVersion", inf.Lister().ResourceVersion())
	// Output:
	// [add a initial=true add b initial=false delete a unknown=false]
	// cached: [b] at resourceVersion 3
}

// A factory shares informers between the parts of a program; WaitForSync
// says which informer did not sync and why.
func ExampleFactory() {
	cfg := controlPlane.ExampleEnv().Config // yours: from a kubeconfig or in-cluster
	factory := informer.NewFactory(cfg, informer.FactoryOptions{})
	configMaps, err := informer.Of[*corev1.ConfigMap](factory, informer.Scope{Namespace: "web"})
	if err != nil {
		panic(err)
	}
	podMetadata, err := informer.OfResource[*metav1.PartialObjectMetadata](factory, corev1.SchemeGroupVersion.WithResource("pods"), informer.Scope{})
	if err != nil {
		panic(err)
	}
	added := make(chan string, 1)
	if _, err := configMaps.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
		AddFunc: func(cm *corev1.ConfigMap, initial bool) {
			if !initial {
				added <- cm.Name
			}
		},
	}, informer.HandlerOptions{Name: "config-watcher"}); err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- factory.Start(ctx) }()
	defer func() { cancel(); <-stopped }()
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if err := factory.WaitForSync(syncCtx); err != nil {
		var se *informer.SyncError
		if errors.As(err, &se) && apierrors.IsForbidden(err) {
			fmt.Println("missing RBAC for", se.Informer)
		}
		panic(err)
	}
	fmt.Println(len(podMetadata.Lister().List(nil)), "pods")

	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		panic(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("web").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "settings-"}}, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	select {
	case name := <-added:
		fmt.Println("added:", name[:len("settings-")])
	case <-time.After(time.Minute):
		fmt.Println("no add within a minute")
	}
	// Output:
	// 0 pods
	// added: settings-
}
