// Package controller holds the test operator's reconciler, as
// `kubebuilder create api` lays a controller out.
package controller

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	widgetsv1 "github.com/kloop-dev/kloop/crcache/internal/operator/api/v1"
)

// WidgetReconciler keeps, for each Widget, a ConfigMap named after it that
// holds its size, and records it in the Widget's status.
type WidgetReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac:groups=widgets.example.kloop.dev,resources=widgets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=widgets.example.kloop.dev,resources=widgets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete

// Reconcile brings the Widget's ConfigMap and status in line with its spec.
func (r *WidgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var widget widgetsv1.Widget
	if err := r.Get(ctx, req.NamespacedName, &widget); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: widget.Namespace, Name: widget.Name + "-data"}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"size": strconv.Itoa(int(widget.Spec.Size))}
		return controllerutil.SetControllerReference(&widget, cm, r.Scheme)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if op != controllerutil.OperationResultNone {
		log.Info("config map", "operation", op)
	}
	if widget.Status.ConfigMap != cm.Name || widget.Status.ObservedGeneration != widget.Generation {
		widget.Status.ConfigMap = cm.Name
		widget.Status.ObservedGeneration = widget.Generation
		if err := r.Status().Update(ctx, &widget); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler: it watches Widgets and the
// ConfigMaps they own.
func (r *WidgetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&widgetsv1.Widget{}).
		Owns(&corev1.ConfigMap{}).
		Named("widget").
		Complete(r)
}
