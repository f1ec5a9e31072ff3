package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/controller"
	"github.com/kloop-dev/kloop/fleet"
	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/testenv"
)

// A fleet of the home cluster alone: a fleet handle's index answers
// through In, a fleet controller's reconcile sees the causes of its key
// (the object's change, named by the For source, through the per-cluster
// source), and In of a cluster that is not joined fails saying so.
func TestFleet_HomeClusterIndexesAndCauses(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane (not started with -short)")
	}
	env, err := testenv.Start(t.Context(), testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	const ns = "fleet-home"
	kc := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kc.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(env.Config, kloop.Options{Name: "fleet-home", Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	f := newFleet(t, app, fleet.Options{Home: "home"})
	cms := fleet.Objects[*corev1.ConfigMap](f)
	if err := cms.AddIndex("owner", func(cm *corev1.ConfigMap) []string { return []string{cm.Data["owner"]} }); err != nil {
		t.Fatal(err)
	}
	causes := make(chan string, 100)
	if _, err := fleet.NewController(f, "configmaps", func(ctx context.Context, k fleet.Key) (controller.Result, error) {
		cs, _ := controller.CausesFrom(ctx)
		for _, c := range cs {
			select {
			case causes <- k.String() + " " + c.String():
			default:
			}
		}
		return controller.Result{}, nil
	}).For(cms).Complete(); err != nil {
		t.Fatal(err)
	}
	testwait.Run(t, "fleet App", app.Run)
	testwait.Closed(t, "fleet App ready", app.Ready())
	testwait.Closed(t, "fleet caches synced", app.Manager().Synced())

	if _, err := kc.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Data: map[string]string{"owner": "alice"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "home/" + ns + "/x For ConfigMap " + ns + "/x@"
	deadline := time.After(30 * time.Second)
	for found := false; !found; {
		select {
		case c := <-causes:
			found = strings.HasPrefix(c, want) && strings.HasSuffix(c, " Added")
		case <-deadline:
			t.Fatalf("no reconcile of home/%s/x caused by the ConfigMap's creation (%q... Added)", ns, want)
		}
	}

	got, err := cms.In("home").ByIndex(t.Context(), ns, "owner", "alice")
	if err != nil || len(got) != 1 || got[0].Name != "x" {
		t.Errorf("In(home).ByIndex(owner=alice) = %d objects, %v; want ConfigMap x", len(got), err)
	}
	if _, err := cms.In("elsewhere").Get(t.Context(), ns, "x"); err == nil || !strings.Contains(err.Error(), `cluster "elsewhere" is not joined`) {
		t.Errorf("In(elsewhere).Get = %v, want an error naming the cluster", err)
	}
}
