package kloopfake_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/kloopfake"
)

func TestSmoke(t *testing.T) {
	srv, err := kloopfake.NewServer(kloopfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloopfake.NewApp(srv, kloop.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	cms := kloop.Objects[*corev1.ConfigMap](app)
	stop, err := kloopfake.Start(t.Context(), app)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	got, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(got.ResourceVersion, got.UID)
	c, err := cms.Get(ctx, "ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(c.Data)
}
