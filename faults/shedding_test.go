package faults

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/metrics"
	"github.com/kloop-dev/kloop/testenv"
)

const (
	shedUser    = "shed-controller"
	shedObjects = 20
	shedLatency = 250 * time.Millisecond // each way: 500ms more per round trip
	// shedConvergeBound: once the pressure ends, every key waiting in the
	// controller's queue is retried within its rate-limiter delay (5ms
	// doubling per failure; the few failures of a minute of pressure keep
	// it under seconds), at 500ms more per request.
	shedConvergeBound = 30 * time.Second
)

// A slow (500ms more per round trip) API server that sheds load (API
// Priority and Fairness gives the controller's user one seat and rejects
// the rest with 429 and Retry-After): the controller's client honours
// Retry-After, its informer neither relists nor loses its watch, failing
// reconciles back off, the throttling shows in
// kloop_rest_client_request_retries_total{code="429"}, and the controller
// converges once the pressure ends.
func TestFault_SlowAndSheddingServer_BackOffNoRelistConverge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	// A small server: 15 seats in all, so the priority level below gets
	// one (APF gives each level at least one).
	e := testenv.StartT(t, testenv.Options{APIServerFlags: []string{"--max-requests-inflight=10", "--max-mutating-requests-inflight=5"}})
	admin := kubernetes.NewForConfigOrDie(e.Config)
	ns := testenv.NewNamespace(t, admin, "shed")
	setup := deadline(t, 30*time.Second, "setup")
	createConfigMaps(setup, t, admin, ns, shedObjects, "1")
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(setup, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: shedUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: shedUser}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	shed(t, setup, admin, true)

	proxy := e.APIServerProxy(t)
	proxy.Set(testenv.Fault{Latency: shedLatency})
	user, err := e.UserConfig(shedUser)
	if err != nil {
		t.Fatal(err)
	}
	cfg := proxy.RESTConfig(user)
	signal := &shedSignal{seen: make(chan struct{}), shedAt: map[string]time.Time{}, asked: map[string]time.Duration{}}
	cfg.WrapTransport = signal.wrap
	cs := kubernetes.NewForConfigOrDie(cfg)
	reg := prometheus.NewRegistry()
	f := informer.NewFactory(cfg, informer.FactoryOptions{Registerer: reg, Logger: logger(t)})
	inf, err := informer.Of[*corev1.ConfigMap](f, informer.Scope{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	// The controller stamps every ConfigMap with the value it saw; it has
	// converged when every stamp equals its value.
	converged := newObserved()
	if _, err := inf.AddHandler(informer.HandlerFuncs[*corev1.ConfigMap]{
		AddFunc:    func(cm *corev1.ConfigMap, _ bool) { converged.set(cm.Name, stampState(cm)) },
		UpdateFunc: func(_, cm *corev1.ConfigMap) { converged.set(cm.Name, stampState(cm)) },
	}, informer.HandlerOptions{Name: "convergence"}); err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.ReconcilerFunc[cache.Key](func(ctx context.Context, k cache.Key) (controller.Result, error) {
		cm, ok := inf.Lister().Get(k.Namespace, k.Name)
		if !ok || cm.Annotations["kloop.dev/stamp"] == cm.Data["v"] {
			return controller.Result{}, nil
		}
		out := cm.DeepCopy()
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations["kloop.dev/stamp"] = cm.Data["v"]
		_, err := cs.CoreV1().ConfigMaps(k.Namespace).Update(ctx, out, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return controller.Result{RequeueAfter: 10 * time.Millisecond}, nil
		}
		return controller.Result{}, err
	}), controller.Options[cache.Key]{Name: "shed", Workers: 8, Registerer: reg, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(controller.For[*corev1.ConfigMap](inf)); err != nil {
		t.Fatal(err)
	}
	shed429 := func() (answers, retries float64) {
		return sumSeries(t, "kloop_rest_client_requests_total", "code", "429"),
			sumSeries(t, "kloop_rest_client_request_retries_total", "", "")
	}
	answersBefore, retriesBefore := shed429()
	testwait.Run(t, "factory", f.Start)
	testwait.Run(t, "controller", c.Start)

	// Under pressure for a while: the values change once more midway.
	pressure := deadline(t, 90*time.Second, "the controller under pressure")
	if err := converged.waitUntil(pressure, func(got map[string]string) bool { return len(got) == shedObjects }); err != nil {
		t.Fatalf("the informer never synced under pressure: %v", err)
	}
	for i := range shedObjects {
		if _, err := admin.CoreV1().ConfigMaps(ns).Patch(pressure, fmt.Sprintf("cm-%d", i), "application/merge-patch+json",
			[]byte(`{"data":{"v":"2"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The server sheds the controller's requests.
	select {
	case <-signal.seen:
	case <-pressure.Done():
		t.Fatalf("the controller's client never got a 429: %v", context.Cause(pressure))
	}

	// The pressure ends.
	shed(t, pressure, admin, false)
	proxy.Set(testenv.Fault{})
	ended := time.Now()
	converge := deadline(t, shedConvergeBound+15*time.Second, "convergence after the pressure")
	if err := converged.waitUntil(converge, func(got map[string]string) bool {
		if len(got) != shedObjects {
			return false
		}
		for _, s := range got {
			if s != "2=2" {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the controller did not converge after the pressure ended: %v", err)
	}
	took := time.Since(ended)
	t.Logf("converged %v after the pressure ended (bound %v)", took.Round(time.Millisecond), shedConvergeBound)
	if took > shedConvergeBound {
		t.Errorf("converged %v after the pressure ended, want within %v", took, shedConvergeBound)
	}
	// The throttling shows in the metrics: 429 answers, and the retries
	// client-go made after waiting out their Retry-After.
	answers, retries := shed429()
	t.Logf("429 answers: %v, client retries after them: %v", answers-answersBefore, retries-retriesBefore)
	if answers-answersBefore < 1 || retries-retriesBefore < 1 {
		t.Errorf("kloop_rest_client_requests_total{code=\"429\"} rose by %v and kloop_rest_client_request_retries_total by %v; want the shedding and the retries to show",
			answers-answersBefore, retries-retriesBefore)
	}
	// Retry-After was honoured: no request came back sooner than it was
	// told to.
	signal.mu.Lock()
	waits, minWait := signal.waits, signal.minWait
	signal.mu.Unlock()
	t.Logf("%d requests repeated after a 429; the shortest came %v after its Retry-After", waits, minWait.Round(time.Millisecond))
	if waits == 0 || minWait < 0 {
		t.Errorf("after a 429, a request came back %v before its Retry-After (of %d repeated)", -minWait, waits)
	}
	// One snapshot only: the informer never relisted under pressure.
	if n := sumSeries(t, "kloop_reflector_events_total", "type", "RelistDone", reg); n != 1 {
		t.Errorf("%v snapshots; want 1 (no relist under 429s)", n)
	}
}

// stampState is "value=stamp" for a ConfigMap.
func stampState(cm *corev1.ConfigMap) string {
	return cm.Data["v"] + "=" + cm.Annotations["kloop.dev/stamp"]
}

// shedSignal closes seen at the first 429 any of the clients it wraps gets,
// and measures how long each client waited before it asked again: the
// shortest such wait against the Retry-After it was given.
type shedSignal struct {
	once sync.Once
	seen chan struct{}

	mu      sync.Mutex
	shedAt  map[string]time.Time     // method and URL → when it got its 429
	asked   map[string]time.Duration // method and URL → the Retry-After it got
	minWait time.Duration            // shortest wait after a 429 minus its Retry-After
	waits   int
}

func (s *shedSignal) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		key := r.Method + " " + r.URL.String()
		s.mu.Lock()
		if at, ok := s.shedAt[key]; ok {
			if d := time.Since(at) - s.asked[key]; s.waits == 0 || d < s.minWait {
				s.minWait = d
			}
			s.waits++
			delete(s.shedAt, key)
		}
		s.mu.Unlock()
		resp, err := next.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			s.once.Do(func() { close(s.seen) })
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			s.mu.Lock()
			s.shedAt[key], s.asked[key] = time.Now(), time.Duration(secs)*time.Second
			s.mu.Unlock()
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sumSeries adds up every series of family with the label pair (every
// series when label is ""), on metrics.Registry or the given gatherer.
func sumSeries(t *testing.T, family, label, value string, g ...prometheus.Gatherer) float64 {
	t.Helper()
	var gatherer prometheus.Gatherer = metrics.Registry
	if len(g) > 0 {
		gatherer = g[0]
	}
	mfs, err := gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" {
				sum += m.GetCounter().GetValue()
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// shed puts the shedding user on a priority level with one seat that
// rejects whatever does not fit (on), or takes it away again (off).
func shed(t *testing.T, ctx context.Context, admin kubernetes.Interface, on bool) {
	t.Helper()
	fc := admin.FlowcontrolV1()
	if !on {
		if err := fc.FlowSchemas().Delete(ctx, shedUser, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: shedUser},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	all := []string{"*"}
	if _, err := fc.FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: shedUser},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: shedUser},
			MatchingPrecedence:         100,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: shedUser}}},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: all, APIGroups: all, Resources: all, Namespaces: all, ClusterScope: true}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: all, NonResourceURLs: all}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
