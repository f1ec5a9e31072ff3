package podwatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/podwatch"
)

// lines is an io.Writer that hands on each line written (podwatch writes
// one per Write), dropping lines nobody is there to read.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	select {
	case l <- strings.TrimSuffix(string(p), "\n"):
	default:
	}
	return len(p), nil
}

// Watch the pods of one namespace: the pod the cache was seeded with is
// reported gone at the first sync, then every pod created is synced.
func ExampleRun() {
	cfg := controlPlane.ExampleEnv().Config // yours: from a kubeconfig or in-cluster
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, err := range []error{
		ignore(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "example"}}, metav1.CreateOptions{})),
		// Pods need their namespace's default ServiceAccount.
		ignore(cs.CoreV1().ServiceAccounts("example").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})),
	} {
		if err != nil {
			panic(err)
		}
	}

	out := make(lines, 10)
	done := make(chan error, 1)
	go func() {
		done <- podwatch.Run(ctx, cfg,
			kloop.Options{Namespace: "example", Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()},
			podwatch.Options{Out: out})
	}()
	next := func() string {
		select {
		case l := <-out:
			return l
		case <-time.After(time.Minute):
			return "(no line within a minute)"
		}
	}
	fmt.Println(next())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := cs.CoreV1().Pods("example").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	fmt.Println(next())
	stop()
	fmt.Println("Run returned", <-done)
	// Output:
	// Pod example/mypod does not exist anymore
	// Sync/Add/Update for Pod web
	// Run returned <nil>
}

// ignore keeps the error of a create, unless the object exists already.
func ignore[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
