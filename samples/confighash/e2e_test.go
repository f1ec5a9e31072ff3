package confighash_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/samples/confighash"
	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/testenv/await"
)

var controlPlane testenv.Shared

func TestMain(m *testing.M) { controlPlane.Main(m) }

func deployment(name string, configMaps ...string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
	for _, cm := range configMaps {
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{
			Name:         cm,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}},
		})
	}
	return d
}

func TestConfigHash_StampsDeploymentsAndRestampsWhenAMountedConfigMapChanges(t *testing.T) {
	env := controlPlane.Env(t)
	kc := kubernetes.NewForConfigOrDie(env.Config)
	ns := testenv.NewNamespace(t, kc, "confighash")
	ctx := t.Context()

	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*appsv1.Deployment{deployment("web", "settings"), deployment("plain"), deployment("later", "not-yet")} {
		if _, err := kc.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	app, err := kloop.New(env.Config, kloop.Options{Name: "confighash", Namespace: ns, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := confighash.Setup(app); err != nil {
		t.Fatal(err)
	}
	await.Run(t, "App.Run", app.Run)

	hash := func(d *appsv1.Deployment) string { return d.Spec.Template.Annotations[confighash.Annotation] }
	// waitFor waits until the named Deployment's hash is set and differs
	// from not, and returns it.
	waitFor := func(name, not string) string {
		t.Helper()
		what := fmt.Sprintf("Deployment %s to get a hash other than %q", name, not)
		return hash(await.Object(t, what, kc.AppsV1().Deployments(ns), name, func(d *appsv1.Deployment) bool {
			h := hash(d)
			return h != "" && h != not
		}))
	}

	first := waitFor("web", "")
	later := waitFor("later", "")

	// A change of the mounted ConfigMap's data re-stamps its Deployment.
	if _, err := kc.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "b"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitFor("web", first)

	// Creating a ConfigMap that was missing re-stamps too.
	if _, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-yet"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("later", later)

	// Going back to the first data gives the first hash: it is a function
	// of the data alone.
	if _, err := kc.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "a"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := waitFor("web", second); got != first {
		t.Errorf("hash after restoring the data = %s, want the first %s", got, first)
	}
	// A Deployment that mounts no ConfigMap is never touched.
	plain, err := kc.AppsV1().Deployments(ns).Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := hash(plain); h != "" {
		t.Errorf("Deployment plain got hash %q, want none", h)
	}
}
