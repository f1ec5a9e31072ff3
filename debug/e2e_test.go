package debug_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/testenv/await"
)

// series flattens a gather into "family{label=value,...}" → value; a
// histogram gives its sample count as family_count.
func series(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(labels)
			key := "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[mf.GetName()+key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[mf.GetName()+key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// timeBased are gauges that move with the clock alone.
var timeBased = []string{"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds", "process_", "go_"}

func still(a, b map[string]float64) bool {
	for k, v := range a {
		if slices.ContainsFunc(timeBased, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// at reads a path of keys and indexes from decoded JSON.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			s, _ := v.([]any)
			if k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func TestSnapshot_AgreesWithTheMetricsOfTheSameMoment(t *testing.T) {
	r := newFooRun(t, controlPlane.Env(t), "a", "b", "c")
	r.takenDeployment("taken")
	r.createFoo("bad", "taken")

	// Something to count: the three Deployments made, "bad" failed twice.
	var snap map[string]any
	await.Until(t, `the controller to make 3 Deployments and fail twice on "bad"`, r.changed.Changed, func() bool {
		snap = r.snapshotJSON()
		ctl := at(snap, "controllers", 0)
		deps := -1.0
		for _, inf := range at(snap, "informers").([]any) {
			if at(inf, "resource") == deploymentResource {
				deps, _ = at(inf, "objects").(float64)
			}
		}
		failed, _ := at(ctl, "reconciles", "error").(float64)
		return failed >= 2 && deps == 4
	})

	// A moment when nothing moves: the metrics are the same before and
	// after the snapshot is read. Something moved in between if they
	// differ; read again at once, as a seqlock reader does: nothing is
	// waited for.
	var before, after map[string]float64
	for attempt := 1; ; attempt++ {
		before = series(t, r.reg)
		snap = r.snapshotJSON()
		after = series(t, r.reg)
		if still(before, after) {
			break
		}
		if attempt == 1000 {
			t.Fatal("the metrics moved across each of 1000 snapshots")
		}
	}

	checked := 0
	metric := func(key string) float64 {
		t.Helper()
		v, ok := after[key]
		if !ok {
			t.Fatalf("no series %s among %d", key, len(after))
		}
		return v
	}
	expect := func(what string, got any, key string) {
		t.Helper()
		checked++
		want := metric(key)
		if g, ok := got.(float64); !ok || g != want {
			t.Errorf("%s = %v, but %s = %v", what, got, key, want)
		}
	}

	if v := at(snap, "version"); v != 1.0 {
		t.Fatalf("version = %v, want 1", v)
	}
	infs, _ := at(snap, "informers").([]any)
	if len(infs) != 2 {
		t.Fatalf("%d informers, want the Foos' and the Deployments'", len(infs))
	}
	inlineSeen := 0
	for _, inf := range infs {
		name, _ := at(inf, "name").(string)
		if name != r.informerName(fooResource) && name != r.informerName(deploymentResource) {
			t.Errorf("unexpected informer %q", name)
		}
		l := fmt.Sprintf("{informer=%s}", name)
		rl := fmt.Sprintf("{reflector=%s}", name)
		expect(name+" objects", at(inf, "objects"), "kloop_informer_objects"+l)
		expect(name+" pending", at(inf, "pending"), "kloop_informer_queue_depth"+l)
		for field, typ := range map[string]string{"add": "add", "update": "update", "delete": "delete", "deleteFinalStateUnknown": "delete_final_state_unknown"} {
			expect(name+" changes."+field, at(inf, "changes", field), fmt.Sprintf("kloop_informer_changes_total{informer=%s,type=%s}", name, typ))
		}
		expect(name+" lists", at(inf, "lists"), "kloop_reflector_lists_total"+rl)
		expect(name+" watches", at(inf, "watches"), "kloop_reflector_watches_total"+rl)
		expect(name+" errors", at(inf, "errors"), "kloop_reflector_errors_total"+rl)
		expect(name+" relists", at(inf, "relists"), fmt.Sprintf("kloop_reflector_events_total{reflector=%s,type=RelistDone}", name))
		rv, _ := strconv.ParseFloat(at(inf, "resourceVersion").(string), 64)
		expect(name+" resourceVersion", rv, "kloop_informer_store_resource_version"+l)
		for _, h := range at(inf, "handlers").([]any) {
			if at(h, "inline") == true {
				// A controller source runs on the informer's goroutine: no
				// queue, so nothing pending and no queue-depth series.
				if at(h, "pending") != 0.0 {
					t.Errorf("inline handler %v has %v pending, want 0", at(h, "name"), at(h, "pending"))
				}
				inlineSeen++
				continue
			}
			expect(name+" handler pending", at(h, "pending"), fmt.Sprintf("kloop_informer_handler_queue_depth{handler=%s,informer=%s}", at(h, "name"), name))
		}
		if at(inf, "synced") != true || at(inf, "state") != "watching" || at(inf, "level") != "ok" {
			t.Errorf("informer %s: synced %v, state %v, level %v; want a healthy one", name, at(inf, "synced"), at(inf, "state"), at(inf, "level"))
		}
	}

	if inlineSeen == 0 {
		t.Error("no handler is shown inline; the controller's For and Owns sources are")
	}

	ctl := at(snap, "controllers", 0)
	if n := len(at(snap, "controllers").([]any)); n != 1 || at(ctl, "name") != foo.ControllerName {
		t.Fatalf("controllers: %d, first %v; want only %s", n, at(ctl, "name"), foo.ControllerName)
	}
	c := "{controller=" + foo.ControllerName
	expect("reconciles.success", at(ctl, "reconciles", "success"), "controller_runtime_reconcile_total"+c+",result=success}")
	expect("reconciles.error", at(ctl, "reconciles", "error"), "controller_runtime_reconcile_total"+c+",result=error}")
	expect("reconciles.requeueAfter", at(ctl, "reconciles", "requeueAfter"), "controller_runtime_reconcile_total"+c+",result=requeue_after}")
	expect("reconciles.total", at(ctl, "reconciles", "total"), "controller_runtime_reconcile_time_seconds_count"+c+"}")
	expect("reconciles.terminal", at(ctl, "reconciles", "terminal"), "controller_runtime_terminal_reconcile_errors_total"+c+"}")
	expect("reconciles.panics", at(ctl, "reconciles", "panics"), "controller_runtime_reconcile_panics_total"+c+"}")
	expect("reconciles.timeouts", at(ctl, "reconciles", "timeouts"), "controller_runtime_reconcile_timeouts_total"+c+"}")
	expect("reconciles.skipped", at(ctl, "reconciles", "skipped"), "kloop_controller_skipped_reconciles_total"+c+"}")
	expect("workers", at(ctl, "workers"), "controller_runtime_max_concurrent_reconciles"+c+"}")
	expect("active", at(ctl, "active"), "controller_runtime_active_workers"+c+"}")
	q := fmt.Sprintf("{controller=%s,name=%s}", foo.ControllerName, foo.ControllerName)
	expect("queue.adds", at(ctl, "queue", "adds"), "workqueue_adds_total"+q)
	expect("queue.retries", at(ctl, "queue", "retries"), "workqueue_retries_total"+q)
	depth := 0.0
	for k, v := range after {
		if strings.HasPrefix(k, "workqueue_depth{controller="+foo.ControllerName+",") {
			depth += v
		}
	}
	after["sum(workqueue_depth)"] = depth
	expect("queue.ready", at(ctl, "queue", "ready"), "sum(workqueue_depth)")
	byPrio := 0.0
	for _, n := range at(ctl, "queue", "readyByPriority").(map[string]any) {
		byPrio += n.(float64)
	}
	expect("sum of queue.readyByPriority", byPrio, "sum(workqueue_depth)")

	// And the snapshot says what went wrong, where the metrics cannot.
	errs, _ := at(ctl, "recentErrors").([]any)
	if len(errs) == 0 || at(errs[0], "key") != r.ns+"/bad" || !strings.Contains(at(errs[0], "error").(string), `"taken" already exists and is not managed by Foo`) {
		t.Errorf("recentErrors = %v; want the failures of %s/bad first", errs, r.ns)
	}
	if checked < 30 {
		t.Errorf("only %d fields checked", checked)
	}
	t.Logf("%d fields agree with the metrics", checked)
}
