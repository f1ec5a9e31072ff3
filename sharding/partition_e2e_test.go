package sharding_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

// A member cut off from the API server gives its slots up by its renew
// deadline, before the other takes them over once its Lease expired; when
// the partition heals it rejoins and the slots split again.
func TestMember_PartitionedMemberStopsBeforeTheTakeoverAndRejoins(t *testing.T) {
	env := cp.Env(t)
	ctx := e2eContext(t, 120*time.Second, "partitioned member")
	cs := kubernetes.NewForConfigOrDie(env.Config)
	run := fmt.Sprintf("p%d", time.Now().UnixNano()%1e9)
	leaseNS := testenv.NewNamespace(t, cs, "leases")
	makeConfigMaps(t, ctx, cs, run, 20)
	proxy := env.APIServerProxy(t)
	note := &await.Signal{}
	a := startReplica(t, env.Config, leaseNS, "a", run, false, note)
	b := startReplica(t, proxy.RESTConfig(env.Config), leaseNS, "b", run, false, note)
	waitSettled(t, ctx, 2, a, b)
	if len(b.member.Status().Active) == 0 {
		t.Fatal("b holds nothing before the partition")
	}

	// Watch when b stops and when a has every slot.
	stopped, taken := make(chan time.Time, 1), make(chan time.Time, 1)
	watch := func(r *replica, done func() bool, at chan<- time.Time) {
		for {
			ch := r.member.StatusChanged()
			if done() {
				at <- time.Now()
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}
	partitioned := time.Now()
	proxy.Set(testenv.Fault{Blackhole: true})
	go watch(b, func() bool { return len(b.member.Status().Active) == 0 && len(b.member.Status().Scope) == 0 }, stopped)
	go watch(a, func() bool { return len(a.member.Status().Active) == 16 }, taken)
	var stopAt, takeAt time.Time
	for stopAt.IsZero() || takeAt.IsZero() {
		select {
		case stopAt = <-stopped:
		case takeAt = <-taken:
		case <-ctx.Done():
			t.Fatalf("%v: b stopped at %v, a took over at %v\n%s\n%s", context.Cause(ctx), stopAt, takeAt, a.member.Status(), b.member.Status())
		}
	}
	t.Logf("b stopped %v after the partition, a took over %v after it", stopAt.Sub(partitioned).Round(time.Millisecond), takeAt.Sub(partitioned).Round(time.Millisecond))
	if !stopAt.Before(takeAt) {
		t.Errorf("b stopped at %v, not before a took over at %v", stopAt.Format(time.StampMilli), takeAt.Format(time.StampMilli))
	}
	if d := stopAt.Sub(partitioned); d > 3*time.Second+time.Second {
		t.Errorf("b stopped %v after the partition; its renew deadline is 3s", d)
	}
	if st := b.member.Status(); st.Joined && !st.Blocked && !st.Leaving {
		t.Error("b is ready (joined, neither blocked nor leaving) while cut off")
	}

	// Healed: b writes its Lease again, holding nothing, and gets its share back.
	proxy.Set(testenv.Fault{})
	waitSettled(t, ctx, 2, a, b)
	if len(b.member.Status().Active) == 0 || len(a.member.Status().Active) == 16 {
		t.Errorf("after healing a holds %d slots, b %d", len(a.member.Status().Active), len(b.member.Status().Active))
	}
}
