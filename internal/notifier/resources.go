package notifier

import (
	"context"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/watcher"
)

// resource is one built-in kind the notifier can watch.
type resource struct {
	// name is the canonical key under `resource:` (kubewatch's YAML key).
	name string
	// aliases are the other keys accepted for it: kubewatch's JSON-tag
	// short names (which kubewatch itself silently ignores in the file)
	// and kubectl's.
	aliases    []string
	kind       string
	apiVersion string
	// clusterScoped kinds ignore the namespace setting, as in kubewatch.
	clusterScoped bool
	// watch asks the App for the kind's informer.
	watch func(app *kloop.App, gvr schema.GroupVersionResource, opts kloop.ObjectsOptions) (informerOf, error)
	// env is kubewatch's environment toggle (KW_POD=true), if it has one.
	env string
}

var resources = []resource{
	{name: "deployment", aliases: []string{"deploy", "deployments"}, kind: "Deployment", apiVersion: "apps/v1", watch: typed[*appsv1.Deployment], env: "KW_DEPLOYMENT"},
	{name: "replicationcontroller", aliases: []string{"rc", "replicationcontrollers"}, kind: "ReplicationController", apiVersion: "v1", watch: typed[*corev1.ReplicationController], env: "KW_REPLICATION_CONTROLLER"},
	{name: "replicaset", aliases: []string{"rs", "replicasets"}, kind: "ReplicaSet", apiVersion: "apps/v1", watch: typed[*appsv1.ReplicaSet], env: "KW_REPLICASET"},
	{name: "daemonset", aliases: []string{"ds", "daemonsets"}, kind: "DaemonSet", apiVersion: "apps/v1", watch: typed[*appsv1.DaemonSet], env: "KW_DAEMONSET"},
	{name: "statefulset", aliases: []string{"sts", "statefulsets"}, kind: "StatefulSet", apiVersion: "apps/v1", watch: typed[*appsv1.StatefulSet]},
	{name: "services", aliases: []string{"svc", "service"}, kind: "Service", apiVersion: "v1", watch: typed[*corev1.Service], env: "KW_SERVICE"},
	{name: "pod", aliases: []string{"po", "pods"}, kind: "Pod", apiVersion: "v1", watch: typed[*corev1.Pod], env: "KW_POD"},
	{name: "job", aliases: []string{"jobs"}, kind: "Job", apiVersion: "batch/v1", watch: typed[*batchv1.Job], env: "KW_JOB"},
	{name: "node", aliases: []string{"no", "nodes"}, kind: "Node", apiVersion: "v1", clusterScoped: true, watch: typed[*corev1.Node], env: "KW_NODE"},
	{name: "clusterrole", aliases: []string{"clusterroles"}, kind: "ClusterRole", apiVersion: "rbac.authorization.k8s.io/v1", clusterScoped: true, watch: typed[*rbacv1.ClusterRole], env: "KW_CLUSTER_ROLE"},
	{name: "clusterrolebinding", aliases: []string{"clusterrolebindings"}, kind: "ClusterRoleBinding", apiVersion: "rbac.authorization.k8s.io/v1", clusterScoped: true, watch: typed[*rbacv1.ClusterRoleBinding], env: "KW_CLUSTER_ROLE_BINDING"},
	{name: "serviceaccount", aliases: []string{"sa", "serviceaccounts"}, kind: "ServiceAccount", apiVersion: "v1", watch: typed[*corev1.ServiceAccount], env: "KW_SERVICE_ACCOUNT"},
	{name: "persistentvolume", aliases: []string{"pv", "persistentvolumes"}, kind: "PersistentVolume", apiVersion: "v1", clusterScoped: true, watch: typed[*corev1.PersistentVolume], env: "KW_PERSISTENT_VOLUME"},
	{name: "namespace", aliases: []string{"ns", "namespaces"}, kind: "Namespace", apiVersion: "v1", clusterScoped: true, watch: typed[*corev1.Namespace], env: "KW_NAMESPACE"},
	{name: "secret", aliases: []string{"secrets"}, kind: "Secret", apiVersion: "v1", watch: typed[*corev1.Secret], env: "KW_SECRET"},
	{name: "configmap", aliases: []string{"cm", "configmaps"}, kind: "ConfigMap", apiVersion: "v1", watch: typed[*corev1.ConfigMap], env: "KW_CONFIGMAP"},
	{name: "ingress", aliases: []string{"ing", "ingresses"}, kind: "Ingress", apiVersion: "networking.k8s.io/v1", watch: typed[*networkingv1.Ingress], env: "KW_INGRESS"},
	{name: "hpa", aliases: []string{"horizontalpodautoscaler", "horizontalpodautoscalers"}, kind: "HorizontalPodAutoscaler", apiVersion: "autoscaling/v2", watch: typed[*autoscalingv2.HorizontalPodAutoscaler]},
	{name: "event", aliases: []string{"events"}, kind: "Event", apiVersion: "events.k8s.io/v1", watch: typed[*eventsv1.Event]},
	{name: "coreevent", aliases: []string{"coreevents"}, kind: "Event", apiVersion: "v1", watch: typed[*corev1.Event]},
}

// lookupResource finds a resource by its name or an alias, ignoring case.
func lookupResource(key string) (*resource, bool) {
	key = strings.ToLower(key)
	for i := range resources {
		r := &resources[i]
		if r.name == key {
			return r, true
		}
		for _, a := range r.aliases {
			if a == key {
				return r, true
			}
		}
	}
	return nil, false
}

// resourceNames lists the accepted keys as "name (alias, alias)".
func resourceNames() string {
	var out []string
	for _, r := range resources {
		s := r.name
		if len(r.aliases) > 0 {
			s += " (" + strings.Join(r.aliases, ", ") + ")"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// objectHandler receives every change of one watched resource, with the
// objects as read-only values of the informer's cache.
type objectHandler struct {
	add    func(obj watcher.Object, initial bool)
	update func(old, new watcher.Object)
	del    func(obj watcher.Object, finalStateUnknown bool)
}

// gvr is the resource's GroupVersionResource: its kind in lower case and
// plural, which holds for every built-in kind here.
func (r *resource) gvr() schema.GroupVersionResource {
	gvr, _ := meta.UnsafeGuessKindToResource(schema.FromAPIVersionAndKind(r.apiVersion, r.kind))
	return gvr
}

// informerOf is one of the App's informers, whatever its object type.
type informerOf struct {
	waitForSync func(context.Context) error
	// attach adds the notifier's handler.
	attach func(objectHandler) (*informer.Registration, error)
}

// typed is the App's typed informer of the built-in type T.
func typed[T interface {
	*E
	watcher.Object
}, E any](app *kloop.App, gvr schema.GroupVersionResource, opts kloop.ObjectsOptions) (informerOf, error) {
	opts.Resource = gvr
	h := kloop.Objects[T](app, opts)
	if err := h.Err(); err != nil {
		return informerOf{}, err
	}
	return informerFor(h.Informer()), nil
}

func informerFor[T watcher.Object](inf *informer.Informer[T]) informerOf {
	return informerOf{
		waitForSync: inf.WaitForSync,
		attach: func(h objectHandler) (*informer.Registration, error) {
			return inf.AddHandler(informer.HandlerFuncs[T]{
				AddFunc:    func(obj T, initial bool) { h.add(obj, initial) },
				UpdateFunc: func(old, new T) { h.update(old, new) },
				DeleteFunc: func(obj T, finalStateUnknown bool) { h.del(obj, finalStateUnknown) },
			}, informer.HandlerOptions{Name: "notifier"})
		},
	}
}

// ResourceName is the canonical name of a built-in resource given by its
// name or an alias (po, pods, svc...), "" if it is none.
func ResourceName(key string) string {
	if r, ok := lookupResource(key); ok {
		return r.name
	}
	return ""
}
