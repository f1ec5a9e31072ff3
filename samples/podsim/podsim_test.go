package podsim_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/samples/podsim"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// controlPlane is etcd and kube-apiserver only: podsim is the one acting on
// pods here.
var controlPlane = testenv.Shared{Examples: "^ExampleRun$"}

func TestMain(m *testing.M) { controlPlane.Main(m) }

// namespaceWithServiceAccount makes a namespace whose pods can be created
// without kube-controller-manager (which would make the default
// ServiceAccount).
func namespaceWithServiceAccount(t *testing.T, kc kubernetes.Interface, prefix string) string {
	t.Helper()
	ns := testenv.NewNamespace(t, kc, prefix)
	if _, err := kc.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// runPodsim runs podsim until the test ends and checks that it stops
// cleanly.
func runPodsim(t *testing.T, e *testenv.Env, opts podsim.Options) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	opts.Registry = prometheus.NewRegistry()
	await.Run(t, "podsim.Run", func(ctx context.Context) error { return podsim.Run(ctx, e.Config, opts) })
}

func pod(name, scheduler string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			SchedulerName:  scheduler,
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "a", Image: "nginx"}, {Name: "b", Image: "redis"}},
		},
	}
}

// eventually waits until cond holds, checking it at once and after every
// change to what podsim acts on (nodes, node leases, pods), failing the
// test with what after timeout or cond's error.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	kc := kubernetes.NewForConfigOrDie(controlPlane.Env(t).Config)
	changed := await.Changes(t, kc.CoreV1().Nodes(), kc.CoordinationV1().Leases(podsim.NodeLeaseNamespace), kc.CoreV1().Pods(""))
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for {
		next := changed.Changed() // before the check, so no change is missed
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		select {
		case <-next:
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, timeout, context.Cause(ctx))
		}
	}
}

func condition(p *corev1.Pod, ct corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return ""
}

func TestPodsim_RegistersAReadyNodeRenewsItsLeaseBindsAndStartsPodsAndFinishesGracefulDeletes(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := namespaceWithServiceAccount(t, kc, "podsim")
	other := namespaceWithServiceAccount(t, kc, "podsim-other")
	node := "node-" + ns

	// Created before podsim starts: found by the initial list.
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("early", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not podsim's: another scheduler's pod, and a pod of a namespace it
	// does not watch.
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("custom-scheduler", "my-scheduler"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Pods(other).Create(ctx, pod("elsewhere", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runPodsim(t, e, podsim.Options{NodeName: node, Namespace: ns, HeartbeatInterval: 200 * time.Millisecond})
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("late", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, 30*time.Second, "node registered and Ready", func(ctx context.Context) (bool, error) {
		n, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})

	// The heartbeat: a Lease owned by the Node, renewed again and again.
	var renewals []time.Time
	eventually(t, 30*time.Second, "node lease renewed twice", func(ctx context.Context) (bool, error) {
		l, err := kc.CoordinationV1().Leases(podsim.NodeLeaseNamespace).Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") != node || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.Spec.RenewTime == nil {
			return false, fmt.Errorf("lease %+v, want one held by and owned by node %s, with a renew time", l, node)
		}
		if rt := l.Spec.RenewTime.Time; len(renewals) == 0 || rt.After(renewals[len(renewals)-1]) {
			renewals = append(renewals, rt)
		}
		return len(renewals) >= 3, nil
	})

	podCIDR := netip.MustParsePrefix(podsim.PodCIDR)
	ips := map[string]string{}
	for _, name := range []string{"early", "late"} {
		var last *corev1.Pod
		eventually(t, 30*time.Second, "pod "+name+" Running and Ready", func(ctx context.Context) (bool, error) {
			p, err := kc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = p
			return podsim.Running(p), nil
		})
		if last.Spec.NodeName != node {
			t.Errorf("pod %s on node %q, want %q", name, last.Spec.NodeName, node)
		}
		for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			if s := condition(last, ct); s != corev1.ConditionTrue {
				t.Errorf("pod %s condition %s = %q, want True", name, ct, s)
			}
		}
		if ip, err := netip.ParseAddr(last.Status.PodIP); err != nil || !podCIDR.Contains(ip) {
			t.Errorf("pod %s IP %q, want one in %s", name, last.Status.PodIP, podCIDR)
		}
		ips[last.Status.PodIP] = name
		if last.Status.HostIP != podsim.NodeIP {
			t.Errorf("pod %s hostIP %q, want %q", name, last.Status.HostIP, podsim.NodeIP)
		}
		if len(last.Status.ContainerStatuses) != 2 {
			t.Errorf("pod %s has %d container statuses, want 2", name, len(last.Status.ContainerStatuses))
		}
		for _, cs := range last.Status.ContainerStatuses {
			if !cs.Ready || cs.State.Running == nil {
				t.Errorf("pod %s container %s: ready=%v state=%+v, want ready and running", name, cs.Name, cs.Ready, cs.State)
			}
		}
		if n := len(last.Status.InitContainerStatuses); n != 1 || last.Status.InitContainerStatuses[0].State.Terminated == nil {
			t.Errorf("pod %s init container statuses %+v, want one terminated", name, last.Status.InitContainerStatuses)
		}
	}
	if len(ips) != 2 {
		t.Errorf("pods share an IP: %v", ips)
	}

	// podsim handled both of its pods; the others must still be untouched
	// (they were created before "late", and never enqueued).
	for _, p := range []struct{ ns, name string }{{ns, "custom-scheduler"}, {other, "elsewhere"}} {
		got, err := kc.CoreV1().Pods(p.ns).Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.NodeName != "" || got.Status.Phase != corev1.PodPending {
			t.Errorf("pod %s/%s was touched: node %q phase %s", p.ns, p.name, got.Spec.NodeName, got.Status.Phase)
		}
	}

	// A graceful delete (30s by default) of a bound pod waits for the
	// kubelet; podsim finishes it at once.
	began := time.Now()
	if err := kc.CoreV1().Pods(ns).Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "gracefully deleted pod gone before its 30s grace period", func(ctx context.Context) (bool, error) {
		_, err := kc.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	t.Logf("graceful delete finished in %v", time.Since(began))
}

// A kubelet never starts a pod again once it has succeeded or failed.
func TestPodsim_LeavesAPodThatHasFinishedFinished(t *testing.T) {
	e := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(e.Config)
	ctx := t.Context()
	ns := namespaceWithServiceAccount(t, kc, "podsim-done")
	node := "node-" + ns
	runPodsim(t, e, podsim.Options{NodeName: node, Namespace: ns})

	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("job", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "pod job Running", func(ctx context.Context) (bool, error) {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, "job", metav1.GetOptions{})
		return err == nil && podsim.Running(p), err
	})
	// Its containers exit 0, as a Job's do.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, "job", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodSucceeded
		_, err = kc.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A pod created now is started after podsim has seen the finished one
	// (one watch, in order).
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod("marker", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "pod marker Running", func(ctx context.Context) (bool, error) {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, "marker", metav1.GetOptions{})
		return err == nil && podsim.Running(p), err
	})
	p, err := kc.CoreV1().Pods(ns).Get(ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("finished pod's phase is %s again, want it left %s", p.Status.Phase, corev1.PodSucceeded)
	}
}

func TestRun_StoppedBeforeItStartsReturnsNil(t *testing.T) {
	e := controlPlane.Env(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := podsim.Run(ctx, e.Config, podsim.Options{NodeName: "never-started", Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()}); err != nil {
		t.Errorf("Run with its context done already = %v, want nil (stopped through ctx)", err)
	}
}
