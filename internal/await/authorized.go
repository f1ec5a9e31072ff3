package await

import (
	"context"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// authorizedEvery is how often Authorized asks again.
const authorizedEvery = 20 * time.Millisecond

// Authorized waits until the API server answers a SubjectAccessReview for
// spec with allowed. It is the one wait of this package that asks again on
// a timer: the RBAC authorizer reads roles and bindings from a cache of its
// own, which catches up with a change some time after the change is
// stored, and nothing tells when. A watch on the bindings would fire too
// early, so Authorized asks every 20 ms. It does not use t's context, so
// that it also works in a cleanup, and fails t, naming spec, if the answer
// is still not allowed after Timeout.
func Authorized(t TB, cs kubernetes.Interface, spec authorizationv1.SubjectAccessReviewSpec, allowed bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	tick := time.NewTicker(authorizedEvery)
	defer tick.Stop()
	for {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed == allowed {
			return
		}
		select {
		case <-ctx.Done():
			var last any = err
			if err == nil {
				last = sar.Status
			}
			t.Fatalf("waiting for RBAC to answer allowed=%v for %+v: not within %v (last answer: %v)", allowed, spec, Timeout, last)
		case <-tick.C:
		}
	}
}
