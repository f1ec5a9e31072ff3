package cache_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kloop-dev/kloop/cache"
)

func Example() {
	store, w, err := cache.New(cache.Options[*corev1.ConfigMap]{
		Indexes: map[string]cache.IndexFunc[*corev1.ConfigMap]{cache.IndexLabel: cache.LabelIndexFunc[*corev1.ConfigMap]},
	})
	if err != nil {
		panic(err)
	}
	// The writer (an informer, normally) applies a consistent snapshot...
	w.Replace([]*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "frontend", UID: "1", ResourceVersion: "10", Labels: map[string]string{"tier": "front"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "backend", UID: "2", ResourceVersion: "11", Labels: map[string]string{"tier": "back"}}},
	}, "11")
	// ...then watch events.
	w.Apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "frontend", UID: "1", ResourceVersion: "12", Labels: map[string]string{"tier": "front"}}}, "12")

	// Readers get read-only objects.
	var lister cache.Lister[*corev1.ConfigMap] = store
	front := lister.List(labels.SelectorFromSet(labels.Set{"tier": "front"}))
	fmt.Println(len(front), front[0].Name, front[0].ResourceVersion)

	// To change one, copy it first.
	mine := cache.Copy(front[0])
	mine.Data = map[string]string{"k": "v"}
	fmt.Println(lister.ResourceVersion(), len(front[0].Data))
	// Output:
	// 1 frontend 12
	// 12 0
}
