package informer

import (
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// watchWindow is the HTTP/2 receive window of each stream of a factory's
// informers, where net/http's default is 4 MiB. An initial list arrives
// faster than it is decoded, so the transport buffers up to a window of it
// while the first sync reaches the process's peak; 256 KiB keeps the
// server about a window ahead of decoding, which is all decoding needs on
// a local network, and takes up to 4 MB off that peak. (A window bounds a
// stream to a window per round trip: 256 KiB per 20 ms is 12.5 MiB/s of
// what is often a gzip-compressed stream.)
const watchWindow = 256 << 10

// watchConfig returns the config a factory's clients are made from: cfg,
// with one transport of their own, shared by all of them (one HTTP/2
// connection), whose streams have a receive window of watchWindow. Other
// clients made from cfg keep client-go's shared transport and its default
// window. A cfg that chooses its own Dial or Transport (a fleet shares one
// connection per cluster that way) is returned as it is.
func watchConfig(cfg *rest.Config) *rest.Config {
	if cfg == nil || cfg.Dial != nil || cfg.Transport != nil {
		return cfg
	}
	c := rest.CopyConfig(cfg)
	// With a Dial of its own, a config gets a new transport from client-go
	// instead of the one cached for its TLS settings; the first one made
	// is kept for all (as fleet's Dialer.Share does).
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	var (
		mu     sync.Mutex
		shared http.RoundTripper
	)
	wrap := cfg.WrapTransport
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		mu.Lock()
		if shared == nil {
			setWindow(rt, watchWindow)
			shared = rt
		}
		rt = shared
		mu.Unlock()
		if wrap != nil {
			return wrap(rt)
		}
		return rt
	}
	return c
}

// setWindow sets the HTTP/2 receive window per stream of the
// *http.Transport at the bottom of rt (client-go wraps it for CA rotation
// and for its cache), unless its HTTP/2 settings are already chosen. The
// transport must not have made a connection yet: each connection takes
// the window it had when it was made.
func setWindow(rt http.RoundTripper, window int) {
	for rt != nil {
		switch t := rt.(type) {
		case *http.Transport:
			if t.HTTP2 == nil {
				t.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: window}
			}
			return
		case utilnet.RoundTripperWrapper:
			rt = t.WrappedRoundTripper()
		default:
			return
		}
	}
}
