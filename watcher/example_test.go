package watcher_test

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/watcher"
)

// A reflector over ConfigMaps: a snapshot first, then changes. A real program
// gets its clientset from kubernetes.NewForConfig; this one uses client-go's
// fake, which does not implement streaming lists, hence InitialListPaginated.
func Example() {
	cs := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}})
	configMaps := cs.CoreV1().ConfigMaps("default")

	lw := watcher.FromClient[*corev1.ConfigMap](configMaps, watcher.Scope{})
	r := watcher.NewReflector(lw, watcher.Options{Name: "configmaps", InitialList: watcher.InitialListPaginated})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	err := r.Run(ctx, func(e watcher.Event[*corev1.ConfigMap]) {
		switch e.Type {
		case watcher.RelistItem:
			fmt.Println(e.Type, e.Object.Name)
		case watcher.RelistDone:
			fmt.Println(e.Type)
			// Synced: make a change the watch will see.
			wg.Go(func() {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "feature-flags"}}
				if _, err := configMaps.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					fmt.Println(err)
				}
			})
		case watcher.Added:
			fmt.Println(e.Type, e.Object.Name)
			cancel() // Run returns nil
		}
	})
	wg.Wait()
	fmt.Println("Run returned", err)
	// Output:
	// RelistItem settings
	// RelistDone
	// Added feature-flags
	// Run returned <nil>
}

// Any Go type served by the API server, with no generated clientset: a
// scheme that knows the type and its list type is enough. For a custom
// resource, pass its Go type and a scheme its AddToScheme was applied to.
func ExampleFromResource() {
	cfg := &rest.Config{Host: "https://127.0.0.1:6443"} // normally from clientcmd or rest.InClusterConfig
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	lw, err := watcher.FromResource[*corev1.ConfigMap](cfg, kscheme.Scheme, gvr, watcher.Scope{
		Namespace:     "default",
		LabelSelector: "app=web",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := watcher.NewReflector(lw, watcher.Options{Name: "web-configmaps"})
	fmt.Println(r.Name())
	// Output: web-configmaps
}
