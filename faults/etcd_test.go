package faults

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/testenv"
)

// etcdRecoveryBound: after etcd is back, the API server reconnects to it
// and the informer resumes its watch (or relists after a 410) within the
// reflector's backoff, at most 60s with the defaults (30s cap, 100% jitter).
const etcdRecoveryBound = 60*time.Second + 15*time.Second

// etcd restarts under a running controller while objects change before,
// during and after: nothing is lost, the cache ends equal to a fresh LIST,
// and every object is reconciled at its final state.
func TestFault_EtcdRestart_NothingLostCacheEqualsAFreshList(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	e := testenv.StartT(t, testenv.Options{})
	admin := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, admin, "etcd-restart")
	setup := deadline(t, 30*time.Second, "setup")
	createConfigMaps(setup, t, admin, ns, 10, "0")
	reg := prometheus.NewRegistry()
	f := informer.NewFactory(e.Config, informer.FactoryOptions{Registerer: reg, Logger: logger(t)})
	m := runMirrored(t, setup, f, ns, "etcd-restart", reg)
	reconciled := m.reconciled

	// write changes cm-i, retrying while etcd is away; the API server
	// answers 5xx or times out meanwhile.
	work := deadline(t, 2*time.Minute, "changes around the etcd restart")
	write := func(i int, v string) {
		for {
			_, err := admin.CoreV1().ConfigMaps(ns).Update(work, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": v},
			}, metav1.UpdateOptions{})
			if err == nil {
				return
			}
			if work.Err() != nil {
				t.Fatalf("update cm-%d: %v", i, err)
			}
			select { // the retry interval of this writer, not a wait for state
			case <-time.After(200 * time.Millisecond):
			case <-work.Done():
			}
		}
	}
	for i := range 3 {
		write(i, "before")
	}
	restarted := make(chan error, 1)
	go func() { restarted <- e.RestartEtcd(work) }()
	for i := 3; i < 7; i++ {
		write(i, "during")
	}
	if err := <-restarted; err != nil {
		t.Fatalf("restart etcd: %v", err)
	}
	back := time.Now()
	for i := 7; i < 10; i++ {
		write(i, "after")
	}
	if err := admin.CoreV1().ConfigMaps(ns).Delete(work, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	catchUp := deadline(t, etcdRecoveryBound+15*time.Second, "catching up after the etcd restart")
	want := serverView(catchUp, t, admin, ns)
	if len(want) != 9 {
		t.Fatalf("fresh LIST has %d objects, want 9: %s", len(want), render(want))
	}
	m.caughtUp(catchUp, t, want, back, "etcd was back", etcdRecoveryBound)
	want["cm-0"] = "" // reconciled as gone
	if err := reconciled.waitUntil(catchUp, func(got map[string]string) bool { return maps.Equal(got, want) }); err != nil {
		t.Fatalf("not every object was reconciled at its final state (want %s): %v", render(want), err)
	}
}
