package informer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kloop-dev/kloop/internal/watchtest"
	"github.com/kloop-dev/kloop/watcher"
)

func TestFactory_SharesOneInformerPerTypeResourceAndScope(t *testing.T) {
	f := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}, FactoryOptions{Registerer: prometheus.NewRegistry()})
	a, err := Of[*corev1.ConfigMap](f, Scope{Namespace: "web"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Of[*corev1.ConfigMap](f, Scope{Namespace: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("asking twice for the same scope returned two informers")
	}
	c, err := Of[*corev1.ConfigMap](f, Scope{Namespace: "web", LabelSelector: "app=x"})
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Fatal("a different label selector shared the informer")
	}
	md, err := OfResource[*metav1.PartialObjectMetadata](f, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Scope{Namespace: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if md.Name() == a.Name() {
		t.Errorf("metadata and full informers share the name %q", a.Name())
	}
	want := []string{`configmaps.v1 [namespace=web]`, `configmaps.v1 [namespace=web, labels="app=x"]`, `configmaps.v1 (metadata) [namespace=web]`}
	var got []string
	for _, s := range f.Status() {
		got = append(got, s.Name)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the names of Status() = %q, want %q", got, want)
	}
}

func TestFactory_WaitForSyncNamesEachInformerThatDidNotSyncAndWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewFactory(nil, FactoryOptions{
			Registerer: prometheus.NewRegistry(),
			Watch:      watcher.Options{InitialList: watcher.InitialListPaginated},
		})
		okLW, deniedLW := watchtest.New[*corev1.ConfigMap](), watchtest.New[*corev1.ConfigMap]()
		okLW.PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{cm("a", "1", "1")}, ResourceVersion: "1"}, nil)
		okLW.PushWatch()
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("RBAC: access denied"))
		for range 50 {
			deniedLW.PushList(watcher.ListPage[*corev1.ConfigMap]{}, forbidden)
		}
		if _, err := OfListerWatcher(f, "configmaps", Scope{}, func(watcher.Scope) (watcher.ListerWatcher[*corev1.ConfigMap], error) { return okLW, nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := OfListerWatcher(f, "secrets-as-configmaps", Scope{Namespace: "locked"}, func(watcher.Scope) (watcher.ListerWatcher[*corev1.ConfigMap], error) { return deniedLW, nil }); err != nil {
			t.Fatal(err)
		}

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- f.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		}()

		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		began := time.Now()
		err := f.WaitForSync(wctx)
		// Refused at its first LIST: no reason to wait for the deadline.
		if waited := time.Since(began); waited != 0 {
			t.Errorf("WaitForSync took %v for an informer refused at once", waited)
		}
		var se *SyncError
		if !errors.As(err, &se) || se.Informer != `secrets-as-configmaps [namespace=locked]` {
			t.Fatalf("err = %v; want a *SyncError for the refused informer only", err)
		}
		if !apierrors.IsForbidden(err) || !errors.Is(err, ErrRefused) {
			t.Errorf("err = %v; want Forbidden and ErrRefused to be visible", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "1 of 2 informers") || !strings.Contains(msg, "forbidden") {
			t.Errorf("message %q does not say which informer failed and why", msg)
		}
	})
}

func TestFactory_StartsInformersAskedForWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewFactory(nil, FactoryOptions{
			Registerer: prometheus.NewRegistry(),
			Watch:      watcher.Options{InitialList: watcher.InitialListPaginated},
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- f.Start(ctx) }()
		synctest.Wait()

		lw := watchtest.New[*corev1.ConfigMap]()
		lw.PushList(watcher.ListPage[*corev1.ConfigMap]{Items: []*corev1.ConfigMap{cm("a", "1", "1")}, ResourceVersion: "1"}, nil)
		lw.PushWatch()
		inf, err := OfListerWatcher(f, "configmaps", Scope{}, func(watcher.Scope) (watcher.ListerWatcher[*corev1.ConfigMap], error) { return lw, nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := inf.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := Of[*corev1.Secret](f, Scope{}); !errors.Is(err, ErrStopped) {
			t.Errorf("Of after Start returned: %v, want ErrStopped", err)
		}
	})
}
