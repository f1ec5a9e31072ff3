package kloop_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/testenv"
)

func TestHandle_GetOrCreateCreatesOnceAndRepairAppliesOnlyWhatDrifted(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "repair")
	app, err := kloop.New(env.Config, kloop.Options{Name: "repairer", Namespace: ns, Logger: quiet(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	// The cache drops what the program never reads.
	cms := kloop.Objects[*corev1.ConfigMap](app, kloop.ObjectsOptions{Resource: configMaps}).WithTransform(func(cm *corev1.ConfigMap) *corev1.ConfigMap {
		delete(cm.Data, "ignored")
		return cm
	})
	startApp(t, app)
	want := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}, Data: map[string]string{"mode": "a", "ignored": "x"}}
	}
	cm, created, err := cms.GetOrCreate(ctx, want())
	if err != nil || !created {
		t.Fatalf("first GetOrCreate: created %v, err %v; want created", created, err)
	}
	first := cm.ResourceVersion
	cm, created, err = cms.GetOrCreate(ctx, want())
	if err != nil || created || cm.ResourceVersion != first {
		t.Fatalf("second GetOrCreate: created %v, rv %s, err %v; want the cached one, rv %s", created, cm.ResourceVersion, err, first)
	}
	if _, ok := cm.Data["ignored"]; ok {
		t.Error(`the cached ConfigMap holds "ignored": WithTransform's function was not applied`)
	}

	// In place (the cached copy lacks "ignored", which the apply sets, so
	// the apply holds only what the cache keeps).
	applied := func(mode string) *corev1ac.ConfigMapApplyConfiguration {
		return corev1ac.ConfigMap("cm", ns).WithData(map[string]string{"mode": mode})
	}
	if got, repaired, err := cms.Repair(ctx, cm, applied("a")); err != nil || repaired || got.ResourceVersion != first {
		t.Fatalf("Repair of a ConfigMap in place: repaired %v, err %v; want no request", repaired, err)
	}
	// Someone changes what the App owns: Repair takes it back.
	if _, err := kc.CoreV1().ConfigMaps(ns).Patch(ctx, "cm", "application/merge-patch+json", []byte(`{"data":{"mode":"b","theirs":"1"}}`), metav1.PatchOptions{FieldManager: "someone"}); err != nil {
		t.Fatal(err)
	}
	server, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, repaired, err := cms.Repair(ctx, server, applied("a"))
	if err != nil || !repaired || got.Data["mode"] != "a" || got.Data["theirs"] != "1" {
		t.Fatalf("Repair of a drifted ConfigMap: repaired %v, data %v, err %v; want mode a back and theirs kept", repaired, got.Data, err)
	}
	// Guarded by the resourceVersion it checked: a stale live object is a
	// conflict, not an apply over a newer state.
	if _, _, err := cms.Repair(ctx, server, applied("c")); err == nil || !strings.Contains(err.Error(), "onflict") && !strings.Contains(err.Error(), "modified") {
		t.Errorf("Repair with a stale live object = %v, want a conflict", err)
	}
}
