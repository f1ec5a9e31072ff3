package kloopfake_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kloop-dev/kloop"
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
