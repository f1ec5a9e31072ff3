package kloop_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/testenv"
)

func TestApp_NamespacesReadsAndReconcilesEveryNamespaceOfTheSetAndNoOther(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	a, b, other := testenv.NewNamespace(t, kc, "set-a"), testenv.NewNamespace(t, kc, "set-b"), testenv.NewNamespace(t, kc, "not-set")
	app, err := kloop.New(env.Config, kloop.Options{Name: "namespaces", Namespaces: []string{a, b}, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app)
	if err := cms.AddIndex("team", func(cm *corev1.ConfigMap) []string { return []string{cm.Labels["team"]} }); err != nil {
		t.Fatal(err)
	}
	seen := make(chan cache.Key, 10)
	if _, err := kloop.NewController(app, "seer", func(_ context.Context, key cache.Key) (controller.Result, error) {
		seen <- key
		return controller.Result{}, nil
	}).For(cms).Complete(); err != nil {
		t.Fatal(err)
	}
	runApp(t, app)
	ctx := t.Context()
	testwait.Closed(t, "the App's caches synced", app.Manager().Synced())

	// Written through the handle, read back at once: read-your-writes in
	// each namespace of the set, though the watches of a and b move apart.
	for _, ns := range []string{other, a, b} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm", Labels: map[string]string{"team": "blue"}}}
		if _, err := cms.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{a, b} {
		got, err := cms.Get(ctx, ns, "cm")
		if err != nil || got.Namespace != ns {
			t.Errorf("Get(%s, cm) = %v, %v right after creating it", ns, got, err)
		}
	}
	all, err := cms.List(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := namespacesOf(all); !slices.Equal(got, sorted(a, b)) {
		t.Errorf("List(\"\") = ConfigMaps cm in %q; want in %q only", got, sorted(a, b))
	}
	inB, err := cms.List(ctx, b, nil)
	if err != nil || !slices.Equal(namespacesOf(inB), []string{b}) {
		t.Errorf("List(%s) = %q, %v", b, namespacesOf(inB), err)
	}
	blue, err := cms.ByIndex(ctx, "", "team", "blue")
	if err != nil || !slices.Equal(namespacesOf(blue), sorted(a, b)) {
		t.Errorf("ByIndex(\"\", team, blue) = %q, %v; want the set's", namespacesOf(blue), err)
	}
	if _, err := cms.Get(ctx, other, "cm"); err == nil {
		t.Errorf("Get(%s, cm) found a ConfigMap outside the set", other)
	}

	want := map[cache.Key]bool{{Namespace: a, Name: "cm"}: true, {Namespace: b, Name: "cm"}: true}
	for len(want) > 0 {
		k := testwait.Receive(t, "a reconcile of each namespace's ConfigMap", seen)
		if k.Namespace == other {
			t.Fatalf("reconciled %s, outside the set", k)
		}
		delete(want, k)
	}
}

func namespacesOf(cms []*corev1.ConfigMap) []string {
	var out []string
	for _, cm := range cms {
		if cm.Name == "cm" {
			out = append(out, cm.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string { slices.Sort(s); return s }
