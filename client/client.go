package client

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// DefaultFieldManager is the field manager used when Options.FieldManager is
// empty.
const DefaultFieldManager = "kloop"

// Options configure New. The zero value works for built-in types.
type Options struct {
	// Scheme maps Go types to API kinds and back. It must register every type
	// used with NewResource, together with its list type (Kind + "List"), in the
	// group and version it is served at. Default: client-go's
	// k8s.io/client-go/kubernetes/scheme.Scheme, which has the built-in
	// types; for custom resources, build a scheme with both (the built-in
	// AddToScheme and your API package's AddToScheme).
	Scheme *runtime.Scheme

	// FieldManager is sent with every create, update and patch, and is the
	// owner of the fields set by Apply. Default: DefaultFieldManager.
	FieldManager string

	// DisableWriteTracking stops the client from recording its writes, so
	// its CachedReaders never wait. Use it for clients whose writes are never
	// read back through a cache (event recorders, leader election), so the
	// tracker does not keep entries nobody clears.
	DisableWriteTracking bool

	// Logger receives warnings (such as a resourceVersion that is not an
	// integer). Default: slog.Default().
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Scheme == nil {
		o.Scheme = scheme.Scheme
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Client talks to one API server for any number of resources. It is safe for
// concurrent use. Create one per program (or per identity) and derive a
// Resource per type with NewResource.
type Client struct {
	cfg          *rest.Config
	httpClient   *http.Client
	scheme       *runtime.Scheme
	codecs       runtime.NegotiatedSerializer
	fieldManager string
	tracker      *writeTracker
	log          *slog.Logger

	mu   sync.Mutex
	rest map[restKey]*rest.RESTClient
}

// restKey names one of a client's REST clients: its group and version, and
// whether it speaks protobuf.
type restKey struct {
	gv    schema.GroupVersion
	proto bool
}

// New returns a client for the API server cfg points at. It copies cfg and
// does no I/O. Requests and responses are protobuf for the types that have
// a protobuf encoding (the built-in ones, as client-go's generated clients
// do), JSON for the others (custom resources), whatever cfg.ContentType
// says. Client-side rate limiting
// follows cfg (QPS and Burst, client-go's 5 and 10 when zero, none when QPS
// is negative, or cfg.RateLimiter) and is shared by every resource of the
// client.
func New(cfg *rest.Config, opts Options) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("client: nil rest.Config")
	}
	opts.defaults()
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS >= 0 {
		// One token bucket for all resources, as a clientset shares one.
		qps, burst := c.QPS, c.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cl := &Client{
		cfg:          c,
		httpClient:   hc,
		scheme:       opts.Scheme,
		codecs:       serializer.NewCodecFactory(opts.Scheme).WithoutConversion(),
		fieldManager: opts.FieldManager,
		log:          opts.Logger,
		rest:         make(map[restKey]*rest.RESTClient),
	}
	if !opts.DisableWriteTracking {
		cl.tracker = newWriteTracker(opts.Logger)
	}
	return cl, nil
}

// Wrote reports whether one of the client's latest writes (a few
// thousand) left the object namespace/name at resourceVersion rv: a watch
// event at that resourceVersion is the client's own write coming back, as
// a controller marks it in its causes (controller.Options.OwnWrite). A
// client with DisableWriteTracking remembers nothing and reports false.
func (c *Client) Wrote(namespace, name, resourceVersion string) bool {
	return c.tracker.Wrote(namespace, name, resourceVersion)
}

// restFor returns the REST client for gv, speaking protobuf (with JSON
// accepted too) when proto is true, creating it on first use. All of them
// share one HTTP client, hence one connection pool.
func (c *Client) restFor(gv schema.GroupVersion, proto bool) (*rest.RESTClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := restKey{gv, proto}
	if rc, ok := c.rest[key]; ok {
		return rc, nil
	}
	cfg := rest.CopyConfig(c.cfg)
	if proto {
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = c.codecs
	rc, err := rest.RESTClientForConfigAndClient(cfg, c.httpClient)
	if err != nil {
		return nil, err
	}
	c.rest[key] = rc
	return rc, nil
}
