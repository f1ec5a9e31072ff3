package secure

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultCacheTTL     = 10 * time.Second
	DefaultMaxCacheSize = 1024
	DefaultCertName     = "tls.crt"
	DefaultKeyName      = "tls.key"
	// DefaultReviewTimeout bounds one TokenReview or SubjectAccessReview.
	DefaultReviewTimeout = 10 * time.Second
)

// Options configures New. The zero value works: a self-signed certificate,
// decisions cached for 10 s, logs to slog.Default().
type Options struct {
	// CertDir, if set, holds the serving certificate and key (CertName and
	// KeyName, default tls.crt and tls.key); New fails when they cannot be
	// read. Empty: a self-signed certificate made by New.
	CertDir, CertName, KeyName string

	// CacheTTL is how long an authentication or authorization decision is
	// reused. Default DefaultCacheTTL; negative turns caching off.
	CacheTTL time.Duration
	// MaxCacheSize bounds the decisions of each kind kept. Default
	// DefaultMaxCacheSize.
	MaxCacheSize int
	// ReviewTimeout bounds each review request. Default DefaultReviewTimeout.
	ReviewTimeout time.Duration

	// Clock times the cache. Default: the real clock.
	Clock clock.PassiveClock
	// Logger receives denied requests (at debug) and review failures (at
	// error). Default slog.Default().
	Logger *slog.Logger
}

// Secure authenticates and authorizes requests through the API server and
// holds the serving certificate. Create it with New; it is safe for
// concurrent use.
type Secure struct {
	opts  Options
	log   *slog.Logger
	authn authenticationclient.TokenReviewInterface
	authz authorizationclient.SubjectAccessReviewInterface
	certs *certSource

	users     *decisions[userInfo]
	decisions *decisions[decision]
}

// New returns a Secure that asks the API server at cfg. It reads the
// certificate (or makes one) and does no other I/O.
func New(cfg *rest.Config, opts Options) (*Secure, error) {
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.MaxCacheSize <= 0 {
		opts.MaxCacheSize = DefaultMaxCacheSize
	}
	if opts.ReviewTimeout <= 0 {
		opts.ReviewTimeout = DefaultReviewTimeout
	}
	if opts.CertName == "" {
		opts.CertName = DefaultCertName
	}
	if opts.KeyName == "" {
		opts.KeyName = DefaultKeyName
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	an, err := authenticationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("secure: authentication client: %w", err)
	}
	az, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("secure: authorization client: %w", err)
	}
	certs, err := newCertSource(opts)
	if err != nil {
		return nil, err
	}
	return &Secure{
		opts:      opts,
		log:       opts.Logger,
		authn:     an.TokenReviews(),
		authz:     az.SubjectAccessReviews(),
		certs:     certs,
		users:     newDecisions[userInfo](opts),
		decisions: newDecisions[decision](opts),
	}, nil
}

// TLSConfig returns the server side of TLS: TLS 1.2 or newer, http/1.1
// only, the certificate of Options (read again when its files change).
func (s *Secure) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: s.certs.get,
	}
}

// Wrap returns a handler that serves a request with h only once the API
// server has authenticated its bearer token and authorized its user for
// the request's path and verb (see the package documentation).
func (s *Secure) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		user, err := s.authenticate(r.Context(), token)
		if err != nil {
			s.log.Error("Authenticating a metrics request failed", "path", r.URL.Path, "err", err)
			http.Error(w, "Authentication failed: the API server could not review the token", http.StatusInternalServerError)
			return
		}
		if !user.authenticated {
			s.log.Debug("Metrics request with an unauthenticated token", "path", r.URL.Path, "reason", user.reason)
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(r.Method)
		d, err := s.authorize(r.Context(), user, verb, r.URL.Path)
		if err != nil {
			s.log.Error("Authorizing a metrics request failed", "user", user.name, "verb", verb, "path", r.URL.Path, "err", err)
			http.Error(w, "Authorization failed: the API server could not review the request", http.StatusInternalServerError)
			return
		}
		if !d.allowed {
			s.log.Debug("Metrics request denied", "user", user.name, "verb", verb, "path", r.URL.Path, "reason", d.reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", user.name, verb, r.URL.Path), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

type userInfo struct {
	authenticated bool
	reason        string // why not
	name, uid     string
	groups        []string
	extra         map[string]authorizationv1.ExtraValue
}

type decision struct {
	allowed bool
	reason  string
}

// The program's own identity needs these two, whatever it serves.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

func (s *Secure) authenticate(ctx context.Context, token string) (userInfo, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if u, ok := s.users.get(key); ok {
		return u, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReviewTimeout)
	defer cancel()
	tr, err := s.authn.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return userInfo{}, fmt.Errorf("TokenReview: %w", err)
	}
	u := userInfo{authenticated: tr.Status.Authenticated, reason: tr.Status.Error}
	if u.authenticated {
		u.name = tr.Status.User.Username
		u.uid = tr.Status.User.UID
		u.groups = tr.Status.User.Groups
		if len(tr.Status.User.Extra) > 0 {
			u.extra = make(map[string]authorizationv1.ExtraValue, len(tr.Status.User.Extra))
			for k, v := range tr.Status.User.Extra {
				u.extra[k] = authorizationv1.ExtraValue(v)
			}
		}
	}
	s.users.put(key, u)
	return u, nil
}

func (s *Secure) authorize(ctx context.Context, u userInfo, verb, path string) (decision, error) {
	key := decisionKey(u, verb, path)
	if d, ok := s.decisions.get(key); ok {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.ReviewTimeout)
	defer cancel()
	sar, err := s.authz.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  u.name,
		UID:                   u.uid,
		Groups:                u.groups,
		Extra:                 u.extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	d := decision{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason}
	if sar.Status.EvaluationError != "" && !d.allowed {
		d.reason = strings.TrimSpace(d.reason + " " + sar.Status.EvaluationError)
	}
	s.decisions.put(key, d)
	return d, nil
}

// decisionKey is everything a SubjectAccessReview is asked with, in a
// canonical order. NUL and \x01 cannot occur in names, groups, verbs, paths
// or extra values.
func decisionKey(u userInfo, verb, path string) string {
	var b strings.Builder
	for _, s := range []string{u.name, u.uid, verb, path} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	groups := slices.Sorted(slices.Values(u.groups))
	b.WriteString(strings.Join(groups, "\x01"))
	for _, k := range slices.Sorted(maps.Keys(u.extra)) {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(strings.Join(u.extra[k], "\x01"))
	}
	return b.String()
}

// decisions is a small TTL cache.
type decisions[V any] struct {
	ttl   time.Duration
	max   int
	clock clock.PassiveClock

	mu sync.Mutex
	m  map[string]entry[V]
}

type entry[V any] struct {
	v       V
	expires time.Time
}

func newDecisions[V any](o Options) *decisions[V] {
	return &decisions[V]{ttl: o.CacheTTL, max: o.MaxCacheSize, clock: o.Clock, m: map[string]entry[V]{}}
}

func (d *decisions[V]) get(key string) (V, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[key]
	if !ok || !d.clock.Now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (d *decisions[V]) put(key string, v V) {
	if d.ttl < 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	if len(d.m) >= d.max {
		for k, e := range d.m {
			if !now.Before(e.expires) {
				delete(d.m, k)
			}
		}
		// Still full of live decisions: start over rather than keep an
		// order of eviction; they are cheap to ask again.
		if len(d.m) >= d.max {
			clear(d.m)
		}
	}
	d.m[key] = entry[V]{v: v, expires: now.Add(d.ttl)}
}

// errNoCert is returned by the certificate source when files vanish.
var errNoCert = errors.New("secure: no serving certificate")
