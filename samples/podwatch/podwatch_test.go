package podwatch_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/podwatch"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// controlPlane serves the Example and the external tests, each in
// namespaces of its own.
var controlPlane = testenv.Shared{Examples: "^ExampleRun$"}

func TestMain(m *testing.M) { controlPlane.Main(m) }

func TestRun_PrintsOnlyPodsOfItsNamespaceAndReturnsNilOnStop(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	for _, ns := range []string{"watched", "other"} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := &await.Buffer{}
	reg := prometheus.NewRegistry()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- podwatch.Run(runCtx, e.Config, kloop.Options{Namespace: "watched", Logger: slog.New(slog.DiscardHandler), Registry: reg}, podwatch.Options{Out: out})
	}()
	mk := func(ns, name string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if _, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("other", "elsewhere")
	mk("watched", "here")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output:\n%s", out)
		}
	})
	await.Until(t, "the line for the watched pod", out.Changed, func() bool {
		return strings.Contains(out.String(), "Sync/Add/Update for Pod here\n")
	})
	stop()
	if err := await.Receive(t, "Run to return after the stop", done); err != nil {
		t.Errorf("Run = %v, want nil after a stop", err)
	}
	if strings.Contains(out.String(), "elsewhere") {
		t.Errorf("printed a pod of another namespace:\n%s", out)
	}
}
