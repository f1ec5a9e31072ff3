// Package await is how kloop's tests wait for something to happen: a
// condition is checked at once and again every time its source says that
// something changed, never by sleeping and looking again. A source is a
// Signal that the code under observation notifies, or an API server's watch
// (Object). Every wait has a deadline, Timeout or the test's own, and a
// test that runs out of it fails with what it was waiting for.
//
// One wait asks again on a timer, because nothing reports the state it
// waits for: Authorized, for the RBAC authorizer's own cache.
//
// The ...Context forms take no testing.TB and return an error instead:
// they serve helper processes and library code that waits for API state
// (kloop.InstallCRD waits for a CRD through ObjectContext).
//
// It is not named wait so that it does not shadow
// k8s.io/apimachinery/pkg/util/wait.
package await
