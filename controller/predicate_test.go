package controller_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
)

type cmOpt func(*corev1.ConfigMap)

func cm(name string, opts ...cmOpt) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1"}}
	for _, o := range opts {
		o(c)
	}
	return c
}

func gen(g int64) cmOpt { return func(c *corev1.ConfigMap) { c.Generation = g } }
func rv(v string) cmOpt { return func(c *corev1.ConfigMap) { c.ResourceVersion = v } }
func lbl(k, v string) cmOpt {
	return func(c *corev1.ConfigMap) {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels[k] = v
	}
}
func ann(k, v string) cmOpt {
	return func(c *corev1.ConfigMap) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[k] = v
	}
}
func ownedBy(apiVersion, kind, name string, isController bool) cmOpt {
	return func(c *corev1.ConfigMap) {
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{
			APIVersion: apiVersion, Kind: kind, Name: name, UID: "u-" + "name", Controller: ptr.To(isController),
		})
	}
}

type E = cache.Event[*corev1.ConfigMap]

func upd(old, new *corev1.ConfigMap) E { return E{Kind: cache.Updated, Old: old, New: new} }
func add(o *corev1.ConfigMap) E        { return E{Kind: cache.Added, New: o} }
func del(o *corev1.ConfigMap) E        { return E{Kind: cache.Deleted, Old: o} }

func TestPredicates_PassOnlyTheChangesTheyNameAndLetAddsAndDeletesThrough(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	tests := []struct {
		name string
		pred controller.Predicate[*corev1.ConfigMap]
		e    E
		want bool
	}{
		{"generation changed", controller.GenerationChanged[*corev1.ConfigMap], upd(cm("a", gen(1)), cm("a", gen(2))), true},
		{"generation same", controller.GenerationChanged[*corev1.ConfigMap], upd(cm("a", gen(1), rv("1")), cm("a", gen(1), rv("2"))), false},
		{"generation: add passes", controller.GenerationChanged[*corev1.ConfigMap], add(cm("a")), true},
		{"generation: delete passes", controller.GenerationChanged[*corev1.ConfigMap], del(cm("a")), true},
		{"rv changed", controller.ResourceVersionChanged[*corev1.ConfigMap], upd(cm("a", rv("1")), cm("a", rv("2"))), true},
		{"rv same (replay)", controller.ResourceVersionChanged[*corev1.ConfigMap], upd(cm("a"), cm("a")), false},
		{"labels changed", controller.LabelsChanged[*corev1.ConfigMap], upd(cm("a", lbl("x", "1")), cm("a", lbl("x", "2"))), true},
		{"labels added", controller.LabelsChanged[*corev1.ConfigMap], upd(cm("a"), cm("a", lbl("x", "1"))), true},
		{"labels same", controller.LabelsChanged[*corev1.ConfigMap], upd(cm("a", lbl("x", "1"), rv("1")), cm("a", lbl("x", "1"), rv("2"))), false},
		{"annotations changed", controller.AnnotationsChanged[*corev1.ConfigMap], upd(cm("a", ann("x", "1")), cm("a", ann("x", "2"))), true},
		{"annotations same", controller.AnnotationsChanged[*corev1.ConfigMap], upd(cm("a", ann("x", "1"), lbl("l", "1")), cm("a", ann("x", "1"), lbl("l", "2"))), false},
		{"selector matches add", controller.MatchLabels[*corev1.ConfigMap](sel), add(cm("a", lbl("app", "web"))), true},
		{"selector rejects add", controller.MatchLabels[*corev1.ConfigMap](sel), add(cm("a", lbl("app", "db"))), false},
		{"selector: update leaving the selection passes", controller.MatchLabels[*corev1.ConfigMap](sel), upd(cm("a", lbl("app", "web")), cm("a", lbl("app", "db"))), true},
		{"selector: update outside passes not", controller.MatchLabels[*corev1.ConfigMap](sel), upd(cm("a", lbl("app", "db")), cm("a", lbl("app", "db2"))), false},
		{"selector matches delete", controller.MatchLabels[*corev1.ConfigMap](sel), del(cm("a", lbl("app", "web"))), true},
		{"nil selector matches all", controller.MatchLabels[*corev1.ConfigMap](nil), add(cm("a")), true},
		{"custom filter", controller.Filter(func(c *corev1.ConfigMap) bool { return c.Name == "a" }), add(cm("a")), true},
		{"custom filter rejects", controller.Filter(func(c *corev1.ConfigMap) bool { return c.Name == "a" }), add(cm("b")), false},
		{"and: both", controller.And[*corev1.ConfigMap](controller.LabelsChanged, controller.ResourceVersionChanged), upd(cm("a", rv("1")), cm("a", rv("2"), lbl("x", "1"))), true},
		{"and: one fails", controller.And[*corev1.ConfigMap](controller.LabelsChanged, controller.ResourceVersionChanged), upd(cm("a", rv("1")), cm("a", rv("2"))), false},
		{"and: none", controller.And[*corev1.ConfigMap](), add(cm("a")), true},
		{"or: one passes", controller.Or[*corev1.ConfigMap](controller.LabelsChanged, controller.AnnotationsChanged), upd(cm("a"), cm("a", ann("x", "1"))), true},
		{"or: none passes", controller.Or[*corev1.ConfigMap](controller.LabelsChanged, controller.AnnotationsChanged), upd(cm("a", rv("1")), cm("a", rv("2"))), false},
		{"or: empty", controller.Or[*corev1.ConfigMap](), add(cm("a")), false},
		{"not", controller.Not[*corev1.ConfigMap](controller.ResourceVersionChanged), upd(cm("a"), cm("a")), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.pred(tc.e); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestControllerOwnerKey_MatchesGroupAndKindOfTheControllerOwnerOnly(t *testing.T) {
	foo := schema.GroupKind{Group: "samplecontroller.k8s.io", Kind: "Foo"}
	deploy := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	tests := []struct {
		name   string
		obj    *corev1.ConfigMap
		owner  schema.GroupKind
		want   cache.Key
		wantOK bool
	}{
		{"controller owner of the kind", cm("c", ownedBy("samplecontroller.k8s.io/v1alpha1", "Foo", "f1", true)), foo, cache.Key{Namespace: "ns", Name: "f1"}, true},
		{"other version of the group still matches", cm("c", ownedBy("samplecontroller.k8s.io/v1", "Foo", "f1", true)), foo, cache.Key{Namespace: "ns", Name: "f1"}, true},
		{"same kind, other group", cm("c", ownedBy("other.example.com/v1", "Foo", "f1", true)), foo, cache.Key{}, false},
		{"controller owner of another kind", cm("c", ownedBy("apps/v1", "Deployment", "d", true)), foo, cache.Key{}, false},
		{"non-controller owner of the kind", cm("c", ownedBy("samplecontroller.k8s.io/v1alpha1", "Foo", "f1", false)), foo, cache.Key{}, false},
		{"non-controller then controller", cm("c", ownedBy("samplecontroller.k8s.io/v1alpha1", "Foo", "x", false), ownedBy("apps/v1", "Deployment", "d", true)), deploy, cache.Key{Namespace: "ns", Name: "d"}, true},
		{"core group", cm("c", ownedBy("v1", "Pod", "p", true)), schema.GroupKind{Kind: "Pod"}, cache.Key{Namespace: "ns", Name: "p"}, true},
		{"no owners", cm("c"), foo, cache.Key{}, false},
		{"malformed apiVersion", cm("c", ownedBy("a/b/c", "Foo", "f1", true)), foo, cache.Key{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := controller.ControllerOwnerKey(tc.obj, tc.owner)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ControllerOwnerKey = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// The built-in predicates are generic functions that need no type argument
// where a Predicate parameter supplies it; this must keep compiling.
var _ = controller.For(controller.Informer[*corev1.ConfigMap](nil), controller.GenerationChanged, controller.LabelsChanged)
