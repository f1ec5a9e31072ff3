// Package testwait holds the waits kloop's own tests use beside those of
// testenv/await: a background Run for the test's length, a channel's
// value or close, a process's exit, a CRD served, the events of several
// watches (Changes), and the two polls on API caches nothing reports
// (Authorized for RBAC, QuotaEnforced for quota admission). Like await's,
// each has a deadline and fails naming what it waited for.
package testwait
