package faults

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/watcher"
)

// The bounds of the silent-watch test, stated where the table of
// docs/faults.md points.
const (
	// silentFor is how long the path to the API server stays blackholed.
	silentFor = 2 * time.Minute
	// noticeBound: client-go's HTTP/2 health check pings a connection
	// after 30s without a frame and closes it when no answer comes within
	// 15s; the watch on it then ends. Plus 15s for the failed reconnect
	// (TLS handshake timeout 10s) to be reported.
	noticeBound = 30*time.Second + 15*time.Second + 15*time.Second
	// silentBackoffMax caps the reflector's backoff in this test, so that
	// catching up once the path returns takes at most two of its delays
	// (with jitter) plus a reconnect.
	silentBackoffMax = 5 * time.Second
	catchUpBound     = 2*2*silentBackoffMax + 15*time.Second
)

// A watch whose connection goes silent (a dead load balancer, a half-open
// connection: the proxy accepts and reads but sends nothing) must be
// noticed within the HTTP/2 health-check bound; once the path returns the
// informer reconnects, its cache equals a fresh LIST, the changes made
// meanwhile reach its handlers, and a controller reconciles every object
// that changed.
func TestFault_SilentWatch_NoticedReconnectedAndCaughtUp(t *testing.T) {
	e := controlPlane.Env(t)
	admin := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, admin, "silent")
	setup := deadline(t, 30*time.Second, "setup")
	createConfigMaps(setup, t, admin, ns, 10, "0")

	// The informer and the controller reach the API server only through
	// the proxy. A user of its own gets a transport of its own (client-go
	// caches transports by credentials).
	proxy := e.APIServerProxy(t)
	user, err := e.UserConfig("silent-watch", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	var (
		silentSince atomic.Pointer[time.Time]
		firstErr    = make(chan time.Duration, 1)
	)
	reg := prometheus.NewRegistry()
	f := informer.NewFactory(proxy.RESTConfig(user), informer.FactoryOptions{
		Watch: watcher.Options{
			Backoff: watcher.Backoff{Max: silentBackoffMax},
			OnError: func(err error) {
				if at := silentSince.Load(); at != nil {
					select {
					case firstErr <- time.Since(*at):
					default:
					}
				}
			},
		},
		Registerer: reg, Logger: logger(t),
	})
	m := runMirrored(t, setup, f, ns, "silent", reg)
	inf, view, reconciled := m.inf, m.view, m.reconciled

	// Silence. Meanwhile the world changes (through the admin's own path).
	now := time.Now()
	silentSince.Store(&now)
	proxy.Set(testenv.Fault{Blackhole: true})
	changed := map[string]bool{}
	work := deadline(t, 30*time.Second, "changes during the blackhole")
	for i := range 4 {
		name := fmt.Sprintf("cm-%d", i)
		if _, err := admin.CoreV1().ConfigMaps(ns).Update(work, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"},
		}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		changed[name] = true
	}
	if err := admin.CoreV1().ConfigMaps(ns).Delete(work, "cm-9", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changed["cm-9"] = true
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(work, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-new"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed["cm-new"] = true

	// Noticed within the bound: the watch fails (or its reconnect does).
	select {
	case d := <-firstErr:
		t.Logf("the reflector noticed the silence after %v (bound %v); last error: %v", d.Round(time.Millisecond), noticeBound, inf.Status().Source.LastError)
		if d > noticeBound {
			t.Errorf("silence noticed after %v, want within %v", d, noticeBound)
		}
	case <-time.After(noticeBound + 30*time.Second):
		t.Fatalf("no list/watch error %v into the blackhole; the silent watch went unnoticed", noticeBound+30*time.Second)
	}
	if v := view.snapshot(); v["cm-new"] != "" {
		t.Fatalf("a change made during the blackhole reached the handler through a silent path: %s", render(v))
	}
	// The rest of the blackhole; the timer is the fault's length, not a
	// wait for a goroutine.
	<-time.After(time.Until(now.Add(silentFor)))

	proxy.Set(testenv.Fault{})
	passed := time.Now()
	catchUp := deadline(t, catchUpBound+15*time.Second, "catching up after the blackhole")
	want := serverView(catchUp, t, admin, ns)
	m.caughtUp(catchUp, t, want, passed, "the path returned", catchUpBound)
	// Every object changed meanwhile was reconciled at its new state (a
	// deleted one with the object gone).
	if err := reconciled.waitUntil(catchUp, func(got map[string]string) bool {
		for name := range changed {
			if rv, ok := got[name]; !ok || rv != want[name] {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("not every changed object was reconciled at its new state (want %s): %v", render(want), err)
	}
	if err := inf.Status().Source.LastError; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("LastError after catching up = %v, want nil", err)
	}
}
