// Package surface counts the exported API of kloop's library packages, so
// that the count is a number a test holds down rather than an estimate,
// and checks that the API is honest about its types.
//
// A library package is a non-main package of the main module that users
// import: everything but samples/, cmd/, internal/, faults/ (tests only)
// and the separate modules bench/, deploy/, tools/ and crcache/. testenv and
// testenv/await are counted: users import them in their tests. The count is
// what a user can reach: the exported top-level functions, the exported
// methods of exported types and the exported types (aliases included) of
// the non-test files; the exported methods an alias brings in from another
// package of the module (an alias of an internal type brings its methods); and
// the types of internal packages that an exported signature names, with
// their exported methods. Methods of interfaces and fields of structs are
// not counted.
//
// The same walk finds what the tests forbid: an exported function, method,
// field or interface method whose type names an unexported type of its
// package or a type of an internal package (a user could use it but not
// write its type), and an init function that assigns to another package's
// variable (a hook filled behind the compiler's back).
//
// The repository's test fails when the total exceeds its limit; the limit
// only goes down. Run it with -v to see the per-package counts:
//
//	go test -v -run TestLibrary ./internal/surface
package surface
