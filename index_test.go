package kloop_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/kloopfake"
)

func byTeam[T interface{ GetLabels() map[string]string }](obj T) []string {
	if team := obj.GetLabels()["team"]; team != "" {
		return []string{team}
	}
	return nil
}

func keysOf[T interface {
	GetNamespace() string
	GetName() string
}](objs []T) []string {
	var out []string
	for _, o := range objs {
		if o.GetNamespace() == "" {
			out = append(out, o.GetName())
		} else {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// startOnFake returns an App on an in-memory server holding objs; setup
// declares its handles, then its informers run (and have synced) until the
// test ends.
func startOnFake(t *testing.T, setup func(*kloop.App), objs ...runtime.Object) {
	t.Helper()
	srv, err := kloopfake.NewServer(kloopfake.Options{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: "index", Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	setup(app)
	stop, err := kloopfake.Start(t.Context(), app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
}

func TestHandle_ByIndexOfANamespacedKindAnswersWithinANamespaceOrAll(t *testing.T) {
	cm := func(ns, name, team string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": team}}}
	}
	var cms *kloop.Handle[*corev1.ConfigMap]
	startOnFake(t, func(app *kloop.App) {
		cms = kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps})
		if err := cms.AddIndex("team", byTeam[*corev1.ConfigMap]); err != nil {
			t.Fatal(err)
		}
	}, cm("a", "x", "blue"), cm("a", "y", "red"), cm("b", "z", "blue"))
	ctx := t.Context()
	for _, tc := range []struct {
		ns   string
		want []string
	}{{"a", []string{"a/x"}}, {"b", []string{"b/z"}}, {"", []string{"a/x", "b/z"}}, {"c", nil}} {
		got, err := cms.ByIndex(ctx, tc.ns, "team", "blue")
		if err != nil || !slices.Equal(keysOf(got), tc.want) {
			t.Errorf("ByIndex(%q, team, blue) = %v, %v; want %v", tc.ns, keysOf(got), err, tc.want)
		}
	}
	// The Lister reads the same values as IndexValue scopes them.
	got, err := cms.Informer().Lister().ByIndex("team", kloop.IndexValue("a", "red"))
	if err != nil || !slices.Equal(keysOf(got), []string{"a/y"}) {
		t.Errorf("Lister().ByIndex(team, IndexValue(a, red)) = %v, %v; want [a/y]", keysOf(got), err)
	}
	if _, err := cms.ByIndex(ctx, "a", "nope", "blue"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("ByIndex of an index never added = %v, want an error naming it", err)
	}
}

func TestHandle_ByIndexOfAClusterScopedKindKeepsValuesAsTheyAre(t *testing.T) {
	ns := func(name, team string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}}}
	}
	var nss *kloop.Handle[*corev1.Namespace]
	startOnFake(t, func(app *kloop.App) {
		nss = kloop.Objects[*corev1.Namespace](app, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("namespaces"), ClusterScoped: true})
		if err := nss.AddIndex("team", byTeam[*corev1.Namespace]); err != nil {
			t.Fatal(err)
		}
	}, ns("one", "blue"), ns("two", "red"), ns("three", "blue"))
	got, err := nss.ByIndex(t.Context(), "", "team", "blue")
	if err != nil || !slices.Equal(keysOf(got), []string{"one", "three"}) {
		t.Errorf("ByIndex(\"\", team, blue) = %v, %v; want [one three]", keysOf(got), err)
	}
	if got, err := nss.Informer().Lister().ByIndex("team", "red"); err != nil || !slices.Equal(keysOf(got), []string{"two"}) {
		t.Errorf("Lister().ByIndex(team, red) = %v, %v; want [two]: a cluster-scoped kind's values are not scoped", keysOf(got), err)
	}
	if _, err := nss.ByIndex(t.Context(), "default", "team", "blue"); err == nil || !strings.Contains(err.Error(), `pass namespace ""`) {
		t.Errorf("ByIndex of a cluster-scoped kind in a namespace = %v, want an error saying to pass \"\"", err)
	}
}
