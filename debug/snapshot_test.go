package debug

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/kindgate"
	"github.com/kloop-dev/kloop/internal/memlimit"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/leaderelection"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/watcher"
	"github.com/kloop-dev/kloop/workqueue"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestBuild_InformerLevelsAndTrouble(t *testing.T) {
	refused := errors.New(`configmaps is forbidden: User "x" cannot list resource "configmaps"`)
	gone := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	waiting := &kindgate.WaitingError{Kind: "Foo samplecontroller.k8s.io/v1alpha1", Reason: "not served"}
	for _, tc := range []struct {
		name       string
		st         informer.Status
		level      string
		trouble    string
		wantState  string
		stateLevel string
	}{
		{"healthy", informer.Status{Synced: true, Source: watcher.Status{Phase: watcher.PhaseWatching}}, LevelOK, "", "watching", LevelOK},
		{"syncing", informer.Status{Source: watcher.Status{Phase: watcher.PhaseListing}}, LevelWarn, "not synced yet", "listing", LevelWarn},
		{"refused", informer.Status{Source: watcher.Status{Phase: watcher.PhaseWaiting, LastError: refused}}, LevelBad, "not synced: configmaps is forbidden", "waiting", LevelBad},
		{"server gone", informer.Status{Synced: true, Source: watcher.Status{Phase: watcher.PhaseWaiting, LastError: gone}}, LevelBad, "not watching (waiting): dial tcp", "waiting", LevelBad},
		{"error while watching", informer.Status{Synced: true, Source: watcher.Status{Phase: watcher.PhaseWatching, LastError: gone}}, LevelWarn, "error: dial tcp", "watching", LevelOK},
		{"waiting for its kind", informer.Status{Synced: true, Source: watcher.Status{Phase: watcher.PhaseWaiting, LastError: waiting}}, LevelWarn, "waiting for kind Foo samplecontroller.k8s.io/v1alpha1: not served", "waiting", LevelWarn},
		{"slow handler", informer.Status{Synced: true, Source: watcher.Status{Phase: watcher.PhaseWatching},
			Handlers: []informer.HandlerStatus{{Name: "slow", Pending: HandlerBacklog + 1}}}, LevelWarn, "handler slow has 1001 notifications waiting", "watching", LevelOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.st.Name = "configmaps.v1 [all namespaces]"
			s := build(input{Time: t0, Informers: []informer.Status{tc.st}}, nil, time.Minute, 5*time.Minute)
			inf := s.Informers[0]
			if inf.Level != tc.level || s.Level != tc.level || inf.State != tc.wantState {
				t.Errorf("level %q (snapshot %q), state %q; want %q, %q", inf.Level, s.Level, inf.State, tc.level, tc.wantState)
			}
			// The page colours the state badge with stateLevel: a kind waited
			// for is amber like the row, a back-off after an error red.
			if inf.StateLevel != tc.stateLevel {
				t.Errorf("state level %q, want %q", inf.StateLevel, tc.stateLevel)
			}
			if tc.trouble == "" && len(inf.Trouble) != 0 || tc.trouble != "" && (len(inf.Trouble) != 1 || !strings.HasPrefix(inf.Trouble[0], tc.trouble)) {
				t.Errorf("trouble %q, want one starting %q", inf.Trouble, tc.trouble)
			}
			if inf.Resource != tc.st.Name {
				t.Errorf("resource %q: an informer without one shows its name", inf.Resource)
			}
		})
	}
}

func TestBuild_CopiesInformerCountsAndScope(t *testing.T) {
	s := build(input{Time: t0, Informers: []informer.Status{{
		Name: "foos [namespace=a]", Resource: "foos.v1alpha1.samplecontroller.k8s.io", Scope: informer.Scope{Namespace: "a"},
		Synced: true, Objects: 3, CacheBytes: 3 << 10, Encoded: true, CacheWhy: "Memory.Encoded is set", ResourceVersion: "77", Pending: 1, Adds: 4, Updates: 5, Deletes: 1, DeletesFinalStateUnknown: 2,
		Handlers: []informer.HandlerStatus{{Name: "h", Pending: 2, Synced: true}},
		Source:   watcher.Status{Phase: watcher.PhaseWatching, LastEvent: t0.Add(-time.Second), Lists: 2, Watches: 3, Errors: 1, Snapshots: 2},
	}}}, nil, time.Minute, time.Minute)
	got, _ := json.Marshal(s.Informers[0])
	want := `{"name":"foos [namespace=a]","resource":"foos.v1alpha1.samplecontroller.k8s.io","scope":"namespace=a","synced":true,` +
		`"state":"watching","stateLevel":"ok","error":"","objects":3,"cacheBytes":3072,"encoded":true,"cacheWhy":"Memory.Encoded is set","resourceVersion":"77","lastEvent":"2026-03-01T11:59:59Z","pending":1,` +
		`"lists":2,"watches":3,"relists":2,"errors":1,"changes":{"add":4,"update":5,"delete":1,"deleteFinalStateUnknown":2},` +
		`"handlers":[{"name":"h","pending":2,"synced":true}],"level":"ok","trouble":[]}`
	if string(got) != want {
		t.Errorf("informer JSON:\n got  %s\n want %s", got, want)
	}
}

// The Go memory limit in force, and why: what the App decided, unless the
// program changed it since; none without an App.
func TestBuild_MemoryLimitAndWhy(t *testing.T) {
	set := memlimit.Decision{Limit: 900 << 20, Why: "90% of the container's memory limit of 1048576000 bytes (/sys/fs/cgroup/memory.max)"}
	for _, tc := range []struct {
		name string
		in   input
		want string
	}{
		{"no App", input{MemoryLimit: math.MaxInt64}, `{"goLimitBytes":0,"why":"not set by kloop.App"}`},
		{"derived", input{MemoryLimit: 900 << 20, MemoryLimitSet: set, MemoryLimitApplied: true},
			`{"goLimitBytes":943718400,"why":"90% of the container's memory limit of 1048576000 bytes (/sys/fs/cgroup/memory.max)"}`},
		{"left", input{MemoryLimit: math.MaxInt64, MemoryLimitSet: memlimit.Decision{Why: "GOMEMLIMIT=1GiB is set: the Go runtime applies it"}, MemoryLimitApplied: true},
			`{"goLimitBytes":0,"why":"GOMEMLIMIT=1GiB is set: the Go runtime applies it"}`},
		{"changed", input{MemoryLimit: 500 << 20, MemoryLimitSet: set, MemoryLimitApplied: true},
			`{"goLimitBytes":524288000,"why":"changed by the program since the start, which set 943718400 bytes: 90% of the container's memory limit of 1048576000 bytes (/sys/fs/cgroup/memory.max)"}`},
	} {
		tc.in.Time = t0
		got, _ := json.Marshal(build(tc.in, nil, time.Minute, time.Minute).Memory)
		if string(got) != tc.want {
			t.Errorf("%s: memory JSON\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
}

// ctl is a controller status with n reconciles (failed of them failing),
// ready keys and a duration histogram.
func ctl(n, failed uint64, ready int, buckets ...uint64) controller.Status {
	return controller.Status{
		Name: "foo", Workers: 2, Succeeded: n - failed, Failed: failed,
		Duration: controller.Histogram{Count: buckets[len(buckets)-1], UpperBounds: []float64{0.1, 0.2, 0.5, math.Inf(1)}, Buckets: buckets},
		Queue:    workqueue.Status{Name: "foo", Ready: ready, ReadyByPriority: map[int]int{0: ready}, Adds: n, Retries: failed},
	}
}

func TestBuild_RatesAndQuantilesOverTheWindow(t *testing.T) {
	history := []sample{
		sampleOf(input{Time: t0.Add(-90 * time.Second), Controllers: []controller.Status{ctl(10, 0, 0, 10, 10, 10, 10)}}),
		sampleOf(input{Time: t0.Add(-40 * time.Second), Controllers: []controller.Status{ctl(100, 0, 2, 100, 100, 100, 100)}}),
		sampleOf(input{Time: t0.Add(-20 * time.Second), Controllers: []controller.Status{ctl(150, 10, 4, 140, 150, 150, 150)}}),
	}
	// 40 s after the window's first sample: 200 more reconciles, 40 failed;
	// of the 200, 100 took ≤0.1s, 100 in (0.2, 0.5].
	now := ctl(300, 40, 30, 200, 200, 300, 300)
	s := build(input{Time: t0, Controllers: []controller.Status{now}}, history, time.Minute, 5*time.Minute)
	c := s.Controllers[0]
	if s.WindowSeconds != 40 {
		t.Fatalf("windowSeconds = %v, want 40 (the oldest sample within a minute)", s.WindowSeconds)
	}
	if c.Rates == nil || c.Rates.Reconciles != 5 || c.Rates.Errors != 1 || c.Rates.Adds != 5 || c.Rates.Retries != 1 {
		t.Errorf("rates = %+v; want 5 reconciles, 1 error, 5 adds, 1 retry per second", c.Rates)
	}
	if !c.Duration.Window || c.Duration.Count != 200 || !near(c.Duration.P50, 0.1) || !near(c.Duration.P99, 0.494) {
		t.Errorf("duration = %+v; want over the window: 200, p50 0.1, p99 0.494", c.Duration)
	}
	// 40 of 200 failed: warn, not bad. Ready went from 2 to 30: growing.
	if c.Level != LevelWarn || len(c.Trouble) != 2 ||
		c.Trouble[0] != "40 of 200 reconciles failed in the last 40s" || !strings.HasPrefix(c.Trouble[1], "queue growing: 30 ready keys, 28 more") {
		t.Errorf("level %q, trouble %q", c.Level, c.Trouble)
	}
	// The series: the three samples within 5 minutes, then now.
	if len(c.Series.Time) != 4 || c.Series.Ready[3] != 30 || c.Series.Reconciles[0] != 0 || c.Series.Reconciles[1] != 1.8 ||
		c.Series.Reconciles[3] != 7.5 || c.Series.Errors[2] != 0.5 || c.Series.Time[3] != float64(t0.Unix()) {
		t.Errorf("series = %+v", c.Series)
	}
}

func TestBuild_MostlyFailingControllerIsBad_AndLifetimeQuantilesWithoutHistory(t *testing.T) {
	history := []sample{sampleOf(input{Time: t0.Add(-10 * time.Second), Controllers: []controller.Status{ctl(10, 0, 0, 10, 10, 10, 10)}})}
	s := build(input{Time: t0, Controllers: []controller.Status{ctl(20, 5, 0, 10, 10, 10, 10)}}, history, time.Minute, time.Minute)
	if c := s.Controllers[0]; c.Level != LevelBad || s.Level != LevelBad || c.Trouble[0] != "5 of 10 reconciles failed in the last 10s" {
		t.Errorf("level %q, trouble %q; want bad: half failed", c.Level, c.Trouble)
	}
	// No new observations in the window: lifetime quantiles.
	if d := s.Controllers[0].Duration; d.Window || d.Count != 10 || !near(d.P50, 0.05) {
		t.Errorf("duration = %+v; want lifetime, 10, p50 0.05", d)
	}
	s = build(input{Time: t0, Controllers: []controller.Status{ctl(20, 5, 0, 10, 10, 10, 10)}}, nil, time.Minute, time.Minute)
	got, _ := json.Marshal(s)
	if c := s.Controllers[0]; c.Rates != nil || c.Level != LevelOK || !strings.Contains(string(got), `"rates":null`) || !strings.Contains(string(got), `"leader":null`) {
		t.Errorf("without history: %s; want rates null, ok, leader null", got)
	}
}

func TestBuild_StuckKeysAndLeader(t *testing.T) {
	c := ctl(1, 0, 1, 1, 1, 1, 1)
	c.Queue.OldestReady = 2 * time.Minute
	c.Queue.LongestRunning = 90 * time.Second
	c.RecentErrors = []controller.Reconcile{{Time: t0, Key: "ns/a", Error: "boom", Retries: 3}}
	leader := leaderelection.Status{Lease: "ns/l", Identity: "me", Leader: "me", Leading: true, LeadingSince: t0.Add(-time.Hour), Renewals: 7}
	s := build(input{Time: t0, Manager: manager.Status{Started: true, Leading: true}, Leader: &leader, Controllers: []controller.Status{c}}, nil, time.Minute, time.Minute)
	got := s.Controllers[0]
	if got.Level != LevelWarn || len(got.Trouble) != 2 || got.Trouble[0] != "a ready key has waited 2m0s" || got.Trouble[1] != "a reconcile has run for 1m30s" {
		t.Errorf("trouble %q", got.Trouble)
	}
	if len(got.RecentErrors) != 1 || got.RecentErrors[0].Key != "ns/a" || got.RecentErrors[0].Retries != 3 {
		t.Errorf("recent errors %+v", got.RecentErrors)
	}
	if s.Leader == nil || s.Leader.Holder != "me" || !s.Leader.LeadingSince.Equal(t0.Add(-time.Hour)) || s.Leader.RenewedAt != nil || s.Leader.Renewals != 7 {
		t.Errorf("leader %+v", s.Leader)
	}
	if !s.Manager.Started || !s.Manager.Leading || s.Version != SchemaVersion {
		t.Errorf("manager %+v, version %d", s.Manager, s.Version)
	}
}

func TestQuantile_InterpolatesWithinBucketsLikeHistogramQuantile(t *testing.T) {
	bounds := []float64{0.1, 0.2, 0.5, math.Inf(1)}
	for _, tc := range []struct {
		q    float64
		cum  []uint64
		want float64
	}{
		{0.5, []uint64{10, 20, 20, 20}, 0.1},
		{0.99, []uint64{10, 20, 20, 20}, 0.198},
		{0.5, []uint64{0, 0, 0, 0}, 0},
		{0.5, []uint64{0, 0, 0, 4}, 0.5}, // all in +Inf: the largest finite bound
		{0.25, []uint64{0, 4, 4, 4}, 0.125},
		{0.5, nil, 0},
	} {
		if got := quantile(tc.q, bounds, tc.cum); !near(got, tc.want) {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.q, tc.cum, got, tc.want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestBuild_ShardTable(t *testing.T) {
	st := sharding.Status{
		Group: "foo", Identity: "foo-a", Slots: 8, Key: sharding.ByNamespace, Joined: true,
		Scope: []int{0, 1, 2, 5},
		Members: []sharding.MemberStatus{
			{Identity: "foo-a", Self: true, Live: true, Held: []int{0, 1, 2, 5}, Assigned: 4, Age: time.Second},
			{Identity: "foo-b", Live: false, Held: []int{3, 4}, Draining: []int{4}, Assigned: 4, Age: time.Minute},
		},
		Informers: []sharding.InformerStatus{{Name: "foos [all namespaces]", Objects: 12, Filtering: "server"}},
	}
	s := build(input{Time: t0, Shards: []sharding.Status{st}}, nil, time.Minute, time.Minute)
	got, _ := json.Marshal(s.Shards)
	want := `[{"group":"foo","identity":"foo-a","slots":8,"key":"namespace","joined":true,"blocked":false,"leaving":false,` +
		`"scope":"0-2,5","inScope":4,"members":[` +
		`{"identity":"foo-a","self":true,"live":true,"held":"0-2,5","heldCount":4,"draining":"","assigned":4,"ageSeconds":1},` +
		`{"identity":"foo-b","self":false,"live":false,"held":"3-4","heldCount":2,"draining":"4","assigned":4,"ageSeconds":60}],` +
		`"informers":[{"name":"foos [all namespaces]","objects":12,"filtering":"server"}],` +
		`"level":"warn","trouble":["member foo-b is not live but holds 2 slots"]}]`
	if string(got) != want {
		t.Errorf("shards JSON:\n got  %s\n want %s", got, want)
	}
	st.Joined = false
	if g := build(input{Time: t0, Shards: []sharding.Status{st}}, nil, time.Minute, time.Minute); g.Level != LevelBad || g.Shards[0].Trouble[0] != "not joined: its Lease is not written or not renewed in time" {
		t.Errorf("not joined: level %q, trouble %q", g.Level, g.Shards[0].Trouble)
	}
	if s := build(input{Time: t0}, nil, time.Minute, time.Minute); s.Shards == nil {
		t.Error("shards is null without sharding; want []")
	}
}

func TestBuild_HotLoopsAreListedWithTheirCausesAndWarned(t *testing.T) {
	c := ctl(1, 0, 1, 1, 1, 1, 1)
	c.HotLoops = []controller.HotLoop{{Key: "ns/a", Reconciles: 12, Since: t0.Add(-time.Second), Last: t0,
		Causes: []controller.Cause{{Source: "For", Kind: "Foo", Namespace: "ns", Name: "a", ResourceVersion: "7", Change: cache.Updated, Own: true}}}}
	s := build(input{Time: t0, Controllers: []controller.Status{c}}, nil, time.Minute, time.Minute)
	got, err := json.Marshal(s.Controllers[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `"hotLoops":[{"key":"ns/a","reconciles":12,`; !strings.Contains(string(got), want) ||
		!strings.Contains(string(got), `"causes":["For Foo ns/a@7 Updated (own)"]`) {
		t.Errorf("controller JSON %s; want hotLoops with ns/a and its cause", got)
	}
	if l := s.Controllers[0]; l.Level != LevelWarn || len(l.Trouble) != 1 || !strings.Contains(l.Trouble[0], "hot loop") {
		t.Errorf("level %s, trouble %q; want a warning of the hot loop", l.Level, l.Trouble)
	}
}

func TestBuild_RecentReconcilesCarryTheirCausesAsText(t *testing.T) {
	c := ctl(1, 0, 1, 1, 1, 1, 1)
	c.Recent = []controller.Reconcile{{
		Time: t0, Key: "ns/web", Duration: 3 * time.Millisecond, Outcome: controller.OutcomeSuccess, CausesTotal: 4,
		Causes: []controller.Cause{{Source: "For", Kind: "Foo", Namespace: "ns", Name: "web", ResourceVersion: "42", Change: cache.Updated}},
	}}
	s := build(input{Time: t0, Controllers: []controller.Status{c}}, nil, time.Minute, time.Minute)
	got, _ := json.Marshal(s.Controllers[0].RecentReconciles)
	want := `[{"time":"` + t0.Format(time.RFC3339Nano) + `","key":"ns/web","outcome":"success","durationSeconds":0.003,"error":"","terminal":false,"retries":0,"causes":["For Foo ns/web@42 Updated"],"causesTotal":4}]`
	if string(got) != want {
		t.Errorf("recentReconciles = %s\nwant %s", got, want)
	}
}

// Reconciles that asked to run again at once (Result.Requeue) count in the
// total, and in the rates, beside those requeued after a delay.
func TestBuild_RequeuesCountInTheTotalAndTheRate(t *testing.T) {
	st := ctl(10, 2, 0, 10, 10, 10, 10)
	st.Succeeded, st.RequeuedAfter, st.Requeued = 5, 1, 2
	base := sampleOf(input{Time: t0.Add(-10 * time.Second), Controllers: []controller.Status{ctl(0, 0, 0, 0, 0, 0, 0)}})
	s := build(input{Time: t0, Controllers: []controller.Status{st}}, []sample{base}, time.Minute, time.Minute)
	r := s.Controllers[0].Reconciles
	if r.Total != 10 || r.Requeue != 2 || r.RequeueAfter != 1 || r.Success != 5 || r.Error != 2 {
		t.Errorf("reconciles %+v; want total 10: 5 success, 2 error, 1 requeueAfter, 2 requeue", r)
	}
	if rates := s.Controllers[0].Rates; rates == nil || !near(rates.Reconciles, 1) {
		t.Errorf("rates %+v, want 1 reconcile a second (10 in 10 s)", rates)
	}
}
