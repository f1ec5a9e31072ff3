package await

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// quotaAskEvery is how often QuotaEnforced asks again.
const quotaAskEvery = 20 * time.Millisecond

// QuotaEnforced waits until the API server refuses a Pod in namespace ns
// for a ResourceQuota: until a dry-run create of a one-container Pod fails
// with Forbidden, naming a quota. Call it after creating a quota that
// allows no Pods, before the test relies on Pods being refused (a
// controller's "cannot create pods" path).
//
// It is the one wait of this package that asks again on a timer (every
// 20 ms): quota admission enforces only the limits in a quota's status,
// which kube-controller-manager's resourcequota-controller fills in
// (without it a quota is never enforced), and reads quotas from a cache of
// its own that catches up some time later; no watch tells when. It fails t
// with the last answer if Pods are still admitted after Timeout.
func QuotaEnforced(t TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "quota-probe-"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
	}
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	tick := time.NewTicker(quotaAskEvery)
	defer tick.Stop()
	for {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "quota") {
			return
		}
		last := "a dry-run Pod was admitted"
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for quota admission to refuse Pods in namespace %s: not within %v (last answer: %s)", ns, Timeout, last)
			return
		case <-tick.C:
		}
	}
}
