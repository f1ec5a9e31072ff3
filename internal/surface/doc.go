// Package surface counts the exported API of kloop's library packages, so
// that the count is a number a test holds down rather than an estimate.
//
// A library package is a non-main package of the main module that users
// import: everything but samples/, cmd/, internal/, faults/ (tests only)
// and the separate modules bench/, deploy/, tools/ and crcache/. testenv and
// testenv/await are counted: users import them in their tests. The count is the exported top-level
// functions, the exported methods of exported types and the exported types
// (aliases included) of the non-test files; methods of interfaces and
// fields of structs are not counted.
//
// The repository's test fails when the total exceeds its limit; the limit
// only goes down. Run it with -v to see the per-package counts:
//
//	go test -v -run TestLibrary ./internal/surface
package surface
