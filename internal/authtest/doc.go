// Package authtest is what tests of servers that the API server secures
// (the metrics endpoint, the debug page, the deployed controllers) need to
// call them as a given ServiceAccount: a token from the TokenRequest API,
// as a kubelet mounts one, and a GET with it as the bearer token. Waiting
// until RBAC allows a call is internal/testwait.Authorized.
package authtest
