// Package testlint checks kloop's own test files for ways of waiting that
// the project does not allow, so that they cannot creep back once removed.
//
// A test waits for goroutines or for state through channels, conditions
// (see testenv/await), a fake clock or testing/synctest, never by sleeping
// on the wall clock or by looking again every so often. WallClockWaits
// finds, outside a synctest bubble, each
//
//   - time.Sleep call;
//   - time.NewTicker or time.Tick call (a test that ticks is polling);
//   - statement that only receives from time.After (a sleep by another
//     name);
//   - call of a Poll function of k8s.io/apimachinery/pkg/util/wait.
//
// A call is inside a bubble when it is lexically inside a function literal
// passed to synctest.Test or synctest.Run: there a sleep advances virtual
// time and returns as soon as every goroutine of the bubble is blocked. A
// call in a named helper is reported even if only synctest tests call it:
// move it into the literal, or allow the helper by name (Finding.Func) with
// the reason, as the repository-wide test of this package does.
//
// time.After as one case of a select, the deadline of a wait on a channel,
// is not reported. The check is lexical and needs no type information:
// "time", "testing/synctest" and apimachinery's wait are recognised by
// their import paths, under whatever name a file imports them.
package testlint
