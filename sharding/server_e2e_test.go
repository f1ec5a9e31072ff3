package sharding_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/slots"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/testenv"
)

// e2eContext bounds a test; the cause says what was being waited for.
func e2eContext(t *testing.T, d time.Duration, what string) context.Context {
	ctx, cancel := context.WithTimeoutCause(t.Context(), d, fmt.Errorf("%s: still not done after %v", what, d))
	t.Cleanup(cancel)
	return ctx
}

// makeConfigMaps creates one ConfigMap labelled run=<run> in each of
// nNamespaces new namespaces and returns the namespaces.
func makeConfigMaps(t *testing.T, ctx context.Context, cs kubernetes.Interface, run string, nNamespaces int) []string {
	t.Helper()
	var nss []string
	for i := range nNamespaces {
		ns := testenv.NewNamespace(t, cs, run)
		nss = append(nss, ns)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"run": run}}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return nss
}

func TestServer_FiltersListAndWatchByShardSelector(t *testing.T) {
	env := cp.Env(t)
	ctx := e2eContext(t, 60*time.Second, "sharded list and watch")
	checkServerSharding(t, ctx, env, true)
}

func TestServer_WithoutTheFeatureGate_IgnoresShardSelector(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane")
	}
	env := testenv.StartT(t, testenv.Options{FeatureGates: map[string]bool{"ShardedListAndWatch": false}})
	ctx := e2eContext(t, 60*time.Second, "list and watch with the gate off")
	checkServerSharding(t, ctx, env, false)
}

func checkServerSharding(t *testing.T, ctx context.Context, env *testenv.Env, gate bool) {
	cs := kubernetes.NewForConfigOrDie(env.Config)
	run := fmt.Sprintf("srv%d", time.Now().UnixNano()%1e6)
	nss := makeConfigMaps(t, ctx, cs, run, 24)
	lower := slots.New(2, 0) // the lower half of the hash space
	sel := slots.Selector("object.metadata.namespace", lower)
	inLower := 0
	for _, ns := range nss {
		if lower.Has(slots.Of(slots.Hash(ns), 2)) {
			inLower++
		}
	}
	if inLower == 0 || inLower == len(nss) {
		t.Fatalf("all %d namespaces hash into one half; pick more", len(nss))
	}

	list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "run=" + run, ShardSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if !gate {
		if list.ShardInfo != nil {
			t.Errorf("gate off: ShardInfo = %+v, want none", list.ShardInfo)
		}
		if len(list.Items) != len(nss) {
			t.Errorf("gate off: list has %d items, want all %d", len(list.Items), len(nss))
		}
	} else {
		if list.ShardInfo == nil || list.ShardInfo.Selector != sel {
			t.Errorf("ShardInfo = %+v, want selector %q", list.ShardInfo, sel)
		}
		if len(list.Items) != inLower {
			t.Errorf("list has %d items, want the %d in the lower half", len(list.Items), inLower)
		}
		for _, cm := range list.Items {
			if !lower.Has(slots.Of(slots.Hash(cm.Namespace), 2)) {
				t.Errorf("%s/%s is outside the selector but was listed", cm.Namespace, cm.Name)
			}
		}
	}

	w, err := cs.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{LabelSelector: "run=" + run, ShardSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var want []string
	for i, ns := range nss {
		name := fmt.Sprintf("cm-%d", i)
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, "application/merge-patch+json", []byte(`{"data":{"touched":"yes"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if !gate || lower.Has(slots.Of(slots.Hash(ns), 2)) {
			want = append(want, ns+"/"+name)
		}
	}
	var got []string
	for len(got) < len(want) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(got), len(want))
			}
			if ev.Type != apiwatch.Modified {
				t.Fatalf("unexpected %s event: %+v", ev.Type, ev.Object)
			}
			cm := ev.Object.(*corev1.ConfigMap)
			got = append(got, cm.Namespace+"/"+cm.Name)
		case <-ctx.Done():
			t.Fatalf("watch: %v; got %d of %d events", context.Cause(ctx), len(got), len(want))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("watch events:\n got %v\nwant %v", got, want)
	}
	if gate {
		// Nothing outside the selector follows: a marker inside it comes next.
		var marker string
		for _, ns := range nss {
			if lower.Has(slots.Of(slots.Hash(ns), 2)) {
				marker = ns
				break
			}
		}
		if _, err := cs.CoreV1().ConfigMaps(marker).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "marker", Labels: map[string]string{"run": run}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || cm.Name != "marker" {
				t.Errorf("after the touches: %s %+v, want the marker", ev.Type, ev.Object)
			}
		case <-ctx.Done():
			t.Fatalf("marker: %v", context.Cause(ctx))
		}
	}
}
