package kloop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/kloopfake"
)

// A read before anything started the handle's informer does not answer
// from the empty cache: it waits, and says why when its context ends.
func TestHandle_ReadBeforeTheInformerStartedIsAnErrorNotAnEmptyAnswer(t *testing.T) {
	seed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	srv, err := kloopfake.NewServer(kloopfake.Options{Objects: []runtime.Object{seed}})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: "early", Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	list, err := cms.List(ctx, "default", nil)
	var se *informer.SyncError
	if err == nil || !errors.As(err, &se) || !errors.Is(err, informer.ErrNotStarted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("List before Start = %d objects, %v; want a *informer.SyncError: not started, deadline exceeded", len(list), err)
	}
	if _, err := cms.Get(ctx, "default", "settings"); !errors.Is(err, informer.ErrNotStarted) {
		t.Fatalf("Get before Start: %v; want ErrNotStarted, not NotFound", err)
	}

	stop, err := kloopfake.Start(t.Context(), app)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	if got, err := cms.Get(t.Context(), "default", "settings"); err != nil || got.Name != "settings" {
		t.Fatalf("Get after Start = %v, %v; want the seeded ConfigMap", got, err)
	}
}
