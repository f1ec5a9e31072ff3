package kloopfake_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/kloopfake"
)

// An App on the in-memory server: a Handle reads the seeded object from
// its cache and writes through the client, and the cache sees the write.
func Example() {
	ctx := context.Background()
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}, Data: map[string]string{"mode": "a"}}
	srv, err := kloopfake.NewServer(kloopfake.Options{Objects: []runtime.Object{seed}})
	if err != nil {
		panic(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: "example"})
	if err != nil {
		panic(err)
	}
	configMaps := kloop.Objects[*corev1.ConfigMap](app)
	stop, err := kloopfake.Start(ctx, app)
	if err != nil {
		panic(err)
	}
	defer stop()

	cm, err := configMaps.Get(ctx, "default", "settings")
	if err != nil {
		panic(err)
	}
	changed := cm.DeepCopy()
	changed.Data["mode"] = "b"
	if _, err := configMaps.Update(ctx, changed); err != nil {
		panic(err)
	}
	if _, err := configMaps.Update(ctx, changed); err != nil {
		fmt.Println("again at the old resourceVersion:", err)
	}
	cm, _ = configMaps.Get(ctx, "default", "settings")
	fmt.Println("cached mode:", cm.Data["mode"])
	// Output:
	// again at the old resourceVersion: Operation cannot be fulfilled on configmaps "settings": the object has been modified; please apply your changes to the latest version and try again
	// cached mode: b
}

// A write the App did not make (another program's, or the test's own
// through a client of its own) reaches the App's cache a moment later:
// Lister().WaitFor, with the resourceVersion the write returned, waits
// until the cache holds it. (The App's own writes need no wait: its
// Handles' Get and List wait for them.)
func ExampleStart_waitForAWrite() {
	ctx := context.Background()
	srv, err := kloopfake.NewServer(kloopfake.Options{})
	if err != nil {
		panic(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: "example", Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	configMaps := kloop.Objects[*corev1.ConfigMap](app)
	stop, err := kloopfake.Start(ctx, app)
	if err != nil {
		panic(err)
	}
	defer stop()

	other := kubernetes.NewForConfigOrDie(srv.Config()) // not the App's client
	written, err := other.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}, Data: map[string]string{"from": "another program"}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	key := cache.Key{Namespace: "default", Name: "elsewhere"}
	if err := configMaps.Informer().Lister().WaitFor(wait, key, written.ResourceVersion); err != nil {
		panic(err)
	}
	cm, found := configMaps.Informer().Lister().Get("default", "elsewhere")
	fmt.Println(found, cm.Data["from"])
	// Output: true another program
}

// Start works on an App of a real API server too (here testenv's etcd and
// kube-apiserver): the informers run and the controllers do not, so a
// test calls a reconcile by hand, once, with nothing else reconciling,
// against the server's real admission, defaulting and resourceVersions.
func ExampleStart_controlPlane() {
	ctx := context.Background()
	env := controlPlane.ExampleEnv()
	ns, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "start-"}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	app, err := kloop.New(env.Config, kloop.Options{Name: "example", Namespace: ns.Name, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	configMaps := kloop.Objects[*corev1.ConfigMap](app)
	// copyConfig writes the ConfigMap key names, with "-copy" added.
	copyConfig := func(ctx context.Context, key cache.Key) (controller.Result, error) {
		src, err := configMaps.Get(ctx, key.Namespace, key.Name)
		if err != nil {
			return controller.Result{}, err
		}
		_, err = configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name + "-copy"}, Data: src.Data})
		return controller.Result{}, err
	}
	// Declared as the program declares it; Start does not run it.
	if _, err := kloop.NewController(app, "copier", copyConfig).For(configMaps).Complete(); err != nil {
		panic(err)
	}
	stop, err := kloopfake.Start(ctx, app)
	if err != nil {
		panic(err)
	}
	defer stop()

	if _, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "settings"}, Data: map[string]string{"mode": "a"}}); err != nil {
		panic(err)
	}
	if _, err := copyConfig(ctx, cache.Key{Namespace: ns.Name, Name: "settings"}); err != nil {
		panic(err)
	}
	copied, err := configMaps.Get(ctx, ns.Name, "settings-copy")
	if err != nil {
		panic(err)
	}
	all, err := configMaps.List(ctx, ns.Name, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("copied mode:", copied.Data["mode"], "uid set by the API server:", copied.UID != "")
	fmt.Println("ConfigMaps in the namespace:", len(all))
	// Output:
	// copied mode: a uid set by the API server: true
	// ConfigMaps in the namespace: 2
}
