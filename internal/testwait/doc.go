// Package testwait holds the waits kloop's own tests use beside those of
// testenv/await: a process's exit, a CRD served, and a poll on the RBAC
// authorizer's cache, which nothing reports (Authorized). Run, Closed,
// Receive, Changes and QuotaEnforced are await's, named here too so that
// kloop's tests find every wait in one place. Like await's, each has a
// deadline and fails naming what it waited for. The samples use await
// alone, as users' tests do (internal/testlint checks it).
package testwait
