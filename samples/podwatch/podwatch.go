package podwatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
)

// Defaults of Run.
const (
	DefaultNamespace  = "default"
	DefaultMaxRetries = 5
	// Missing is the pod the cache is seeded with before the start, as in
	// client-go's example: it does not exist, so the first sync prints
	// "Pod <namespace>/mypod does not exist anymore".
	Missing = "mypod"
)

// Options configures Run beyond kloop.Options. The zero value has one
// worker, 5 retries and writes to stdout.
type Options struct {
	Workers    int       // pods synced at once; default 1
	MaxRetries int       // retries of a failing sync before the pod is dropped; 0 means 5
	Out        io.Writer // receives the sync lines; default os.Stdout

	failSync func(*corev1.Pod) error // set by this package's tests only
}

// podwatch only lists and watches the pods of its one namespace: a Role
// there ("system" is a placeholder that kustomize replaces with the
// namespace of deploy/podwatch, whose pods it watches).
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch,namespace=system

// Run watches the pods of app.Namespace (default "default") until ctx is
// done, printing "Sync/Add/Update for Pod <name>" for every pod it syncs
// and "Pod <namespace>/<name> does not exist anymore" for every pod gone.
// It returns nil once stopped through ctx, after the sync in flight.
func Run(ctx context.Context, cfg *rest.Config, app kloop.Options, opts Options) error {
	if app.Namespace == "" {
		app.Namespace = DefaultNamespace
	}
	a, err := kloop.New(cfg, app)
	if err != nil {
		return err
	}
	pods := kloop.Objects[*corev1.Pod](a, kloop.ObjectsOptions{Resource: corev1.SchemeGroupVersion.WithResource("pods")})
	// The informer is nil when Objects failed, which a.Run reports; Seed
	// fails only after the informer started.
	if inf := pods.Informer(); inf != nil && inf.Seed(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: Missing}}) != nil {
		return errors.New("podwatch: the Pod cache is seeded before its informer starts: call Run once")
	}
	out := cmp.Or[io.Writer](opts.Out, os.Stdout)
	sync := func(ctx context.Context, key cache.Key) (controller.Result, error) {
		pod, err := pods.Get(ctx, key.Namespace, key.Name)
		if apierrors.IsNotFound(err) {
			fmt.Fprintf(out, "Pod %s does not exist anymore\n", key)
			return controller.Result{}, nil
		}
		if err == nil && opts.failSync != nil {
			err = opts.failSync(pod)
		}
		if err != nil {
			return controller.Result{}, fmt.Errorf("syncing pod %s: %w", key, err)
		}
		fmt.Fprintf(out, "Sync/Add/Update for Pod %s\n", pod.Name)
		return controller.Result{}, nil
	}
	kloop.NewController(a, "podwatch", sync).For(pods).Workers(opts.Workers).
		WithOptions(func(o *controller.Options[cache.Key]) { o.MaxRetries = cmp.Or(opts.MaxRetries, DefaultMaxRetries) }).Complete()
	return a.Run(ctx)
}
