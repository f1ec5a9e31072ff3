// Package confighash is a second controller on kloop, written from the
// "Write a controller" in docs/controllers.md: it stamps on every Deployment a
// hash of the data of the ConfigMaps its pods mount as volumes, in the pod
// template's annotation Annotation, so that changing a mounted ConfigMap
// rolls the Deployment's pods.
//
// A Deployment is reconciled when it changes and when a ConfigMap it mounts
// changes (found through an index of Deployments by mounted ConfigMap). A
// missing ConfigMap counts as empty, so creating it later rolls the pods
// too. The ConfigMaps are read at least as fresh as the change that woke the
// reconcile (Handle.CatchUp). The annotation is written with a merge patch
// of that one field, so nothing else of the Deployment is touched.
package confighash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/client"
	"github.com/kloop-dev/kloop/controller"
)

// Annotation is the pod-template annotation that holds the hash.
const Annotation = "kloop.dev/config-hash"

// ControllerName names the controller in logs and metrics.
const ControllerName = "confighash"

// byConfigMap indexes Deployments by the name of each ConfigMap their pods
// mount (the App keeps the values per namespace).
const byConfigMap = "configmap"

// Setup declares the controller in app.
func Setup(app *kloop.App) error {
	r := &Reconciler{
		Deployments: kloop.Objects[*appsv1.Deployment](app),
		ConfigMaps:  kloop.Objects[*corev1.ConfigMap](app),
	}
	if err := r.Deployments.AddIndex(byConfigMap, configMapNames); err != nil {
		return err
	}
	_, err := kloop.NewController(app, ControllerName, r.Reconcile).
		For(r.Deployments).
		Watches(kloop.MapTo(r.ConfigMaps, r.deploymentsMounting)).
		Complete()
	return err
}

// Reconciler stamps one Deployment.
type Reconciler struct {
	Deployments *kloop.Handle[*appsv1.Deployment]
	ConfigMaps  *kloop.Handle[*corev1.ConfigMap]
}

// Reconcile brings the Deployment's annotation up to date with its
// ConfigMaps. A Deployment that mounts none and was never stamped is left
// alone.
func (r *Reconciler) Reconcile(ctx context.Context, key cache.Key) (controller.Result, error) {
	dep, err := r.Deployments.Get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	names := configMapNames(dep)
	if _, stamped := dep.Spec.Template.Annotations[Annotation]; len(names) == 0 && !stamped {
		return controller.Result{}, nil // mounts no ConfigMap: leave it alone
	}
	// The ConfigMaps' informer may lag the Deployments' (or the reverse):
	// read them at least as fresh as the change that woke this reconcile,
	// so that a ConfigMap edited just before is not hashed in its old
	// state, which would roll the pods twice.
	if len(names) > 0 {
		if err := r.ConfigMaps.CatchUp(ctx, dep.Namespace, ""); err != nil {
			return controller.Result{}, err
		}
	}
	h := sha256.New()
	for _, name := range names {
		cm, err := r.ConfigMaps.Get(ctx, dep.Namespace, name)
		if err != nil && !apierrors.IsNotFound(err) {
			return controller.Result{}, err
		}
		data := map[string]string{}
		if err == nil {
			data = cm.Data
		}
		b, _ := json.Marshal(data) // sorted keys: a stable hash
		fmt.Fprintf(h, "%s=%s\n", name, b)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	if dep.Spec.Template.Annotations[Annotation] == sum {
		return controller.Result{}, nil
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, Annotation, sum)
	_, err = r.Deployments.Patch(ctx, dep.Namespace, dep.Name, types.MergePatchType, []byte(patch), client.PatchOptions{})
	return controller.Result{}, err
}

// deploymentsMounting maps a ConfigMap to the Deployments that mount it. A
// map function must not block, so it reads the index through the Lister,
// which does not wait for the App's own writes.
func (r *Reconciler) deploymentsMounting(cm *corev1.ConfigMap) []cache.Key {
	deps, _ := r.Deployments.Informer().Lister().ByIndex(byConfigMap, kloop.IndexValue(cm.Namespace, cm.Name))
	keys := make([]cache.Key, 0, len(deps))
	for _, d := range deps {
		keys = append(keys, cache.KeyOf(d))
	}
	return keys
}

// configMapNames lists the ConfigMaps the Deployment's pods mount, sorted.
func configMapNames(dep *appsv1.Deployment) []string {
	var names []string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && !slices.Contains(names, v.ConfigMap.Name) {
			names = append(names, v.ConfigMap.Name)
		}
	}
	slices.Sort(names)
	return names
}
