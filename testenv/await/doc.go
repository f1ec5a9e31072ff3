// Package await is how tests of controllers wait for something to happen,
// kloop's own and its users': a condition is checked at once and again
// every time its source says that something changed, never by sleeping and
// looking again. Every wait has a deadline (Timeout, or the test's own) and
// a test that runs out of it fails saying what it waited for and what it
// last saw.
//
// The sources:
//   - the API server's watch: Object ("eventually this object satisfies
//     f"), Gone ("this object is gone"), Watched (a condition over several
//     objects);
//   - a controller's log: Logs is an slog.Handler that keeps records;
//     Logged waits for a record, Reconciled for a controller to have
//     reconciled a key, NextReconcile for a reconcile still to come;
//   - several watches at once: Changes, a Signal for Until;
//   - the code under test: a Signal it notifies (Until), a Buffer of a
//     command's output, a channel (Receive, Closed), a Run stopped at the
//     test's end.
//
// None asks again on a timer but QuotaEnforced, since quota admission's
// cache reports nothing.
//
// Every wait ends with the test's context, or after Timeout, whichever is
// first, and then fails the test it is given.
//
// It is not named wait so that it does not shadow
// k8s.io/apimachinery/pkg/util/wait.
package await
