package notifier

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/testenv"
)

// Two notifiers on Apps with leader election over one Lease: only the
// leader notifies; once it stops, the other takes over from the
// checkpoint the first saved and notifies what changed since.
func TestNotifier_WithLeaderElectionOnlyTheLeaderNotifiesAndTheOtherTakesOver(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, kc, "notifier-leader")
	recv := newReceiver(t)
	logs := &logBuffer{}
	defer func() {
		if t.Failed() {
			t.Logf("notifier logs:\n%s", logs)
		}
	}()
	type replica struct {
		path string
		app  *kloop.App
		n    *Notifier
		stop context.CancelFunc
		done chan error
	}
	var replicas []*replica
	for _, name := range []string{"one", "two"} {
		app := newApp(t, e.Config, kloop.Options{Name: "notifier", Namespace: ns, HealthAddr: "127.0.0.1:0", Logger: logs.Logger().With("replica", name), Registry: prometheus.NewRegistry(),
			LeaderElection: &kloop.LeaderElection{Identity: name, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}})
		r := &replica{path: "/" + name, app: app, done: make(chan error, 1)}
		var err error
		r.n, err = New(app, Config{Namespace: ns, Resources: []string{"configmap"},
			Sinks: []SinkConfig{{Name: "hook", Type: SinkWebhook, URL: recv.URL + r.path}}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		r.stop = stop
		go func() { r.done <- app.Run(ctx) }()
		replicas = append(replicas, r)
	}
	stopped := func(r *replica) {
		r.stop()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("%s: Run = %v", r.path, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: Run did not return within 60s of the stop", r.path)
		}
	}
	defer func() {
		for _, r := range replicas {
			if r.stop != nil {
				stopped(r)
			}
		}
	}()
	var leader, standby *replica
	select {
	case <-replicas[0].n.Synced():
		leader, standby = replicas[0], replicas[1]
	case <-replicas[1].n.Synced():
		leader, standby = replicas[1], replicas[0]
	case <-time.After(60 * time.Second):
		t.Fatal("no replica became the leader and synced within 60s")
	}

	createConfigMaps(t, kc, ns, "first")
	recv.waitFor(t, leader.path, "the leader's notification", is("Created", "ConfigMap", "first"))
	select {
	case <-standby.n.Synced():
		t.Fatal("the standby notifier started while the other leads")
	default:
	}
	// The standby is ready (warm caches, waiting for the lease), so that a
	// rollout of two replicas is not held up by the one that waits.
	select {
	case <-standby.app.Manager().Synced():
	case <-time.After(60 * time.Second):
		t.Fatal("the standby's caches did not sync within 60s")
	}
	for _, r := range []*replica{leader, standby} {
		resp, err := http.Get("http://" + r.app.Manager().Status().HealthAddr.String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: /readyz = %d, want 200:\n%s", r.path, resp.StatusCode, body)
		}
	}

	stopped(leader)
	leader.stop = nil
	createConfigMaps(t, kc, ns, "while-handing-over")
	select {
	case <-standby.n.Synced():
	case <-time.After(60 * time.Second):
		t.Fatal("the standby did not take over within 60s of the leader's stop")
	}
	createConfigMaps(t, kc, ns, "second")
	recv.waitFor(t, standby.path, "the new leader's notification", is("Created", "ConfigMap", "second"))
	recv.waitFor(t, standby.path, "the change made during the handover", is("Created", "ConfigMap", "while-handing-over"))
	if countOf(recv.payloads(standby.path), "Created", "first") != 0 {
		t.Errorf("the new leader sent again what the old one had notified:\n%s", summary(recv.payloads(standby.path)))
	}
	if n := len(recv.payloads(leader.path)); n != 1 {
		t.Errorf("the old leader sent %d notifications, want 1:\n%s", n, summary(recv.payloads(leader.path)))
	}
}
