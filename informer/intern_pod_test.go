package informer

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/watcher"
)

// replica is a pod of ReplicaSet app as the API server returns it: the
// template's containers, env, probes, resources and volumes, plus what is
// each pod's own (its name, UID, the service-account token's volume and
// mounts, its IP), decoded from protobuf so that each part is an
// allocation of its own.
func replica(t testing.TB, app string, i int) *corev1.Pod {
	t.Helper()
	token := fmt.Sprintf("kube-api-access-%s%d", app, i)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	grace := int64(30)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", app, i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%s%d", app, i)), ResourceVersion: fmt.Sprint(i + 1),
			Labels:      map[string]string{"app": app},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "note": "for " + app},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/" + app + ":v1",
				Args:           []string{"--log-level=info"},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:            []corev1.EnvVar{{Name: "APP", Value: app}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources:      res,
				LivenessProbe:  probe,
				ReadinessProbe: probe,
				VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}}}},
				{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
			},
			NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
			Tolerations:                   []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: &grace,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i)},
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var decoded corev1.Pod
	if err := decoded.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	return &decoded
}

func TestInterner_PodsReadBackEqualToTheirDecodedFormAndReplicasShareTheirTemplatesParts(t *testing.T) {
	in := newInterner()
	var pods, want []*corev1.Pod
	for _, app := range []string{"web", "api"} {
		for i := range 3 {
			p := replica(t, app, i)
			want = append(want, p.DeepCopy())
			in.object(p)
			pods = append(pods, p)
		}
	}
	for i, p := range pods {
		if !reflect.DeepEqual(p, want[i]) {
			t.Fatalf("pod %s after interning differs from its decoded form:\n got  %+v\n want %+v", p.Name, p, want[i])
		}
	}
	web0, web1, api0 := pods[0], pods[1], pods[3]
	c0, c1 := &web0.Spec.Containers[0], &web1.Spec.Containers[0]
	shared := map[string]bool{
		"env":              &c0.Env[0] == &c1.Env[0],
		"ports":            &c0.Ports[0] == &c1.Ports[0],
		"args":             &c0.Args[0] == &c1.Args[0],
		"liveness probe":   c0.LivenessProbe == c1.LivenessProbe,
		"resources":        reflect.ValueOf(c0.Resources.Limits).UnsafePointer() == reflect.ValueOf(c1.Resources.Limits).UnsafePointer(),
		"configMap volume": web0.Spec.Volumes[0].ConfigMap == web1.Spec.Volumes[0].ConfigMap,
		"token projection": web0.Spec.Volumes[1].Projected == web1.Spec.Volumes[1].Projected,
		"node selector":    reflect.ValueOf(web0.Spec.NodeSelector).UnsafePointer() == reflect.ValueOf(web1.Spec.NodeSelector).UnsafePointer(),
		"tolerations":      &web0.Spec.Tolerations[0] == &web1.Spec.Tolerations[0],
		"grace period":     web0.Spec.TerminationGracePeriodSeconds == web1.Spec.TerminationGracePeriodSeconds,
		"annotations":      reflect.ValueOf(web0.Annotations).UnsafePointer() == reflect.ValueOf(web1.Annotations).UnsafePointer(),
	}
	for part, ok := range shared {
		if !ok {
			t.Errorf("replicas of one ReplicaSet do not share their %s", part)
		}
	}
	// What is each pod's own stays its own; other templates are not mixed in.
	own := map[string]bool{
		"container structs":  c0 == c1,
		"volume mounts":      &c0.VolumeMounts[0] == &c1.VolumeMounts[0],
		"volumes":            &web0.Spec.Volumes[0] == &web1.Spec.Volumes[0],
		"env of another app": &c0.Env[0] == &api0.Spec.Containers[0].Env[0],
		"annotations of api": reflect.ValueOf(web0.Annotations).UnsafePointer() == reflect.ValueOf(api0.Annotations).UnsafePointer(),
	}
	for part, same := range own {
		if same {
			t.Errorf("%s are shared between pods, want each pod's own", part)
		}
	}
	// Equal parts are shared whatever their template.
	if c0.LivenessProbe != api0.Spec.Containers[0].LivenessProbe {
		t.Error("equal probes of two apps are not shared")
	}
}

func TestInterner_AnnotationSetsWithLongValuesOrDifferentBytesAreNotShared(t *testing.T) {
	in := newInterner()
	long := strings.Repeat("x", internMaxLen+1)
	a := in.annotations(map[string]string{"k": long})
	b := in.annotations(map[string]string{"k": long})
	if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		t.Error("annotation sets with a long value are shared, want each object's own")
	}
	// A value that holds what would separate entries in a naive key.
	c := in.annotations(map[string]string{"a": "x\x00b\x00c"})
	d := in.annotations(map[string]string{"a": "x", "b": "c"})
	if len(c) != 1 || c["a"] != "x\x00b\x00c" || len(d) != 2 || d["b"] != "c" {
		t.Errorf("annotation sets mixed up: %q %q", c, d)
	}
}

// podSource is a scripted Source of Pods.
type podSource struct {
	ch chan watcher.Event[*corev1.Pod]
}

func (s *podSource) LastError() error { return nil }

func (s *podSource) Run(ctx context.Context, emit func(watcher.Event[*corev1.Pod])) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-s.ch:
			emit(e)
		}
	}
}

func TestInformer_AReaderThatModifiesASharedPodPartIsCaughtByTheMutationDetector(t *testing.T) {
	t.Setenv(cache.MutationDetectorEnv, "1")
	synctest.Test(t, func(t *testing.T) {
		src := &podSource{ch: make(chan watcher.Event[*corev1.Pod])}
		inf, err := New[*corev1.Pod](src, Options[*corev1.Pod]{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- inf.Start(ctx) }()
		src.ch <- watcher.Event[*corev1.Pod]{Type: watcher.RelistStart}
		for i := range 2 {
			src.ch <- watcher.Event[*corev1.Pod]{Type: watcher.RelistItem, Object: replica(t, "web", i)}
		}
		src.ch <- watcher.Event[*corev1.Pod]{Type: watcher.RelistDone, ResourceVersion: "9"}
		<-inf.Synced()
		a, _ := inf.Lister().Get("ns", "web-0")
		b, _ := inf.Lister().Get("ns", "web-1")
		if &a.Spec.Containers[0].Env[0] != &b.Spec.Containers[0].Env[0] {
			t.Fatal("the cached replicas do not share their env")
		}

		// A reader writes through a's env, and so into b's.
		a.Spec.Containers[0].Env[0].Value = "changed"
		var caught error
		func() {
			defer func() {
				if r := recover(); r != nil {
					caught, _ = r.(error)
				}
			}()
			caught = inf.writer.CheckMutations()
		}()
		if caught == nil || !strings.Contains(caught.Error(), "was modified in place") || !strings.Contains(caught.Error(), "changed") {
			t.Errorf("mutation detector: %v, want a report of the changed env", caught)
		}
		a.Spec.Containers[0].Env[0].Value = "web"
		if err := inf.writer.CheckMutations(); err != nil {
			t.Errorf("after the value is put back: %v", err)
		}
		// A copy is the reader's own to change.
		cp := cache.Copy(b)
		cp.Spec.Containers[0].Env[0].Value = "mine"
		if b.Spec.Containers[0].Env[0].Value != "web" || a.Spec.Containers[0].Env[0].Value != "web" {
			t.Error("changing a copy changed the cached pods")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

// BenchmarkInterner_Pod is the sharing's cost per pod, on the reflector's
// goroutine: go test -run '^$' -bench Interner_Pod ./informer
func BenchmarkInterner_Pod(b *testing.B) {
	pods := make([]*corev1.Pod, 64)
	for i := range pods {
		pods[i] = replica(b, fmt.Sprintf("app%d", i%4), i)
	}
	in := newInterner()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		in.object(pods[i%len(pods)])
	}
}

// Pod templates carry nothing of one pod's: Deployments made from one
// manifest share their container list whole, and read back as decoded.
func TestInterner_DeploymentsOfOneManifestShareTheirContainerList(t *testing.T) {
	deployment := func(name, image string) *appsv1.Deployment {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "1"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx", "controller": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: image}}},
			}},
		}
		b, err := d.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var decoded appsv1.Deployment
		if err := decoded.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		return &decoded
	}
	in := newInterner()
	var ds, want []*appsv1.Deployment
	for i, image := range []string{"nginx:1", "nginx:1", "nginx:2"} {
		d := deployment(fmt.Sprint("d", i), image)
		want = append(want, d.DeepCopy())
		in.object(d)
		ds = append(ds, d)
	}
	for i, d := range ds {
		if !reflect.DeepEqual(d, want[i]) {
			t.Fatalf("Deployment %s after interning differs from its decoded form:\n got  %+v\n want %+v", d.Name, d, want[i])
		}
	}
	c0, c1, c2 := &ds[0].Spec.Template.Spec.Containers[0], &ds[1].Spec.Template.Spec.Containers[0], &ds[2].Spec.Template.Spec.Containers[0]
	if c0 != c1 {
		t.Error("two Deployments with equal containers do not share their container list")
	}
	if c0 == c2 {
		t.Error("Deployments with different images share their container list")
	}
}
