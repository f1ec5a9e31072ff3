package podwatch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// logLines keeps the lines a text handler writes (one Write per record) and
// closes dropped at the first drop log.
type logLines struct {
	mu      sync.Mutex
	lines   []string
	dropped chan struct{}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := string(p)
	l.lines = append(l.lines, line)
	if strings.Contains(line, "dropping the key after too many retries") {
		select {
		case <-l.dropped:
		default:
			close(l.dropped)
		}
	}
	return len(p), nil
}

func (l *logLines) matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

func TestRun_RetriesAFailingSyncFiveTimesThenDropsThePod(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	const ns = "podwatch-retry"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount (no
	// kube-controller-manager runs here to make it).
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flaky := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "flaky"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, flaky, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	errBoom := errors.New("boom")
	var mu sync.Mutex
	attempts := 0
	logs := &logLines{dropped: make(chan struct{})}
	reg := prometheus.NewRegistry()
	app := kloop.Options{Namespace: ns, Logger: slog.New(slog.NewTextHandler(logs, nil)), Registry: reg}
	opts := Options{
		Out: io.Discard,
		failSync: func(p *corev1.Pod) error {
			if p.Name != "flaky" {
				return nil
			}
			mu.Lock()
			attempts++
			mu.Unlock()
			return errBoom
		},
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, e.Config, app, opts) }()
	defer func() {
		stop()
		if err := await.Receive(t, "Run to return after the stop", done); err != nil {
			t.Errorf("Run = %v, want nil after a stop", err)
		}
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", strings.Join(logs.matching(), ""))
		}
	})

	await.Closed(t, "the drop log", logs.dropped)
	drops := logs.matching("dropping the key after too many retries")
	if len(drops) != 1 || !strings.Contains(drops[0], "key="+ns+"/flaky") || !strings.Contains(drops[0], "boom") || !strings.Contains(drops[0], "level=ERROR") {
		t.Errorf("drop logs %q, want one ERROR naming %s/flaky and the sync error", drops, ns)
	}
	if retries := logs.matching("will retry", "key="+ns+"/flaky"); len(retries) != DefaultMaxRetries {
		t.Errorf("%d retries logged for the failing pod, want %d before the drop:\n%s", len(retries), DefaultMaxRetries, strings.Join(retries, ""))
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts != DefaultMaxRetries+1 {
		t.Errorf("%d sync attempts of the failing pod, want %d", attempts, DefaultMaxRetries+1)
	}
}
