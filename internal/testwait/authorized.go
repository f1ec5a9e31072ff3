package testwait

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kloop-dev/kloop/testenv/await"
)

// askEvery is how often the waits of this file ask again.
const askEvery = 20 * time.Millisecond

// Authorized waits until the API server answers a SubjectAccessReview for
// spec with allowed. The RBAC authorizer reads roles and bindings from a
// cache of its own, which catches up with a change some time after the
// change is stored, and nothing tells when: a watch on the bindings would
// fire too early. So Authorized asks again every 20 ms (with
// await.QuotaEnforced, the only waits of kloop's tests that ask on a timer). It does not use t's
// context, so that it also works in a cleanup, and fails t, naming spec, if
// the answer is still not allowed after await.Timeout.
func Authorized(t await.TB, cs kubernetes.Interface, spec authorizationv1.SubjectAccessReviewSpec, allowed bool) {
	t.Helper()
	ask(t, fmt.Sprintf("RBAC to answer allowed=%v for %+v", allowed, spec), func(ctx context.Context) (bool, any) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return sar.Status.Allowed == allowed, sar.Status
	})
}

// QuotaEnforced is await.QuotaEnforced, for kloop's own tests beside
// Authorized.
func QuotaEnforced(t await.TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	await.QuotaEnforced(t, cs, ns)
}

// ask calls try every askEvery until it reports done, and fails t with
// try's last answer if that takes longer than await.Timeout.
func ask(t await.TB, what string, try func(ctx context.Context) (done bool, last any)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	tick := time.NewTicker(askEvery)
	defer tick.Stop()
	for {
		done, last := try(ctx)
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: not within %v (last answer: %v)", what, await.Timeout, last)
			return
		case <-tick.C:
		}
	}
}
