// Package secure serves an HTTP handler, /metrics in practice, the way a
// cluster expects a controller's metrics to be served: over TLS, and only
// to callers the API server vouches for.
//
// Each request must carry a bearer token. The API server authenticates it
// (a TokenReview) and then authorizes the user it names for the request's
// path and verb (a SubjectAccessReview with non-resource attributes: for a
// scrape, nonResourceURL "/metrics", verb "get"). This is what
// controller-runtime's filters.WithAuthenticationAndAuthorization does, here
// without a dependency on k8s.io/apiserver.
//
//	s, err := secure.New(restConfig, secure.Options{})
//	srv := &http.Server{Handler: s.Wrap(metricsHandler), TLSConfig: s.TLSConfig()}
//	srv.ServeTLS(listener, "", "")
//
// # Answers
//
//   - No bearer token, or one the API server does not authenticate: 401.
//   - An authenticated user the API server does not authorize: 403, naming
//     the user, the verb and the path.
//   - The API server cannot be asked (down, timeout, or this program lacks
//     the right to ask): 500, logged; nothing is cached.
//   - Otherwise the wrapped handler answers.
//
// # The rights it needs
//
// The program's own identity needs create on tokenreviews
// (authentication.k8s.io) and subjectaccessreviews (authorization.k8s.io),
// both cluster-scoped: the built-in ClusterRole system:auth-delegator, or the
// one generated from this package's RBAC markers. A scraper needs get on the
// nonResourceURL /metrics.
//
// # Caching
//
// Decisions are reused for CacheTTL (default 10 s), keyed by a SHA-256 of the
// token for authentication and by user, groups, verb and path for
// authorization, so a scrape every few seconds costs the API server two
// reviews per CacheTTL, not two per scrape. A revoked token or a removed
// binding therefore takes up to CacheTTL to take effect. At most MaxCacheSize
// decisions of each kind are kept.
//
// # TLS
//
// With Options.CertDir empty, New makes a self-signed ECDSA certificate for
// localhost, 127.0.0.1, ::1 and the host name, valid for a year: enough for a
// Prometheus that scrapes with insecure_skip_verify or pins it. With CertDir
// set, the certificate and key are read from CertName and KeyName there (as
// mounted from a kubernetes.io/tls Secret) and read again whenever either
// file changes, so a rotated Secret is served without a restart. HTTP/2 is
// not offered (only http/1.1), as controller-runtime and kubebuilder do by
// default since the HTTP/2 rapid-reset attacks.
package secure
