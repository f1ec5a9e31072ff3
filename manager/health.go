package manager

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kloop-dev/kloop/leaderelection"
)

type namedCheck struct {
	name  string
	check func(r *http.Request) error
}

// AddHealthzCheck adds a check c to /healthz: c returns nil when healthy,
// and an error that says what is wrong otherwise. Call it before Start.
func (m *Manager) AddHealthzCheck(name string, c func(r *http.Request) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.healthz = append(m.healthz, namedCheck{name, c})
}

// AddReadyzCheck adds a check c to /readyz, as AddHealthzCheck does to
// /healthz. Call it before Start.
func (m *Manager) AddReadyzCheck(name string, c func(r *http.Request) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readyz = append(m.readyz, namedCheck{name, c})
}

// AddReadyzReport adds a text report (a table of state, say) that
// /readyz prints after its checks when asked with ?verbose, and when a
// check failed. report is called for each such request and must be quick.
// Call it before Start.
func (m *Manager) AddReadyzReport(report func() string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.readyzReports = append(m.readyzReports, report)
}

var (
	errNotSynced   = errors.New("caches not synced yet")
	errNotElecting = errors.New("leader election not running")
	errStopping    = errors.New("shutting down")
)

// Handler returns an HTTP handler of all the manager's endpoints: /metrics,
// /healthz and /readyz. Start serves them on MetricsAddr and HealthAddr;
// use Handler to mount them on a server of your own instead.
//
// /healthz and /readyz answer 200 "ok" or 503 with the failing checks;
// "?verbose" lists every check. /readyz includes "caches" (every cache
// synced), with leader election "leader-election" (campaigning: leading
// or standing by, both ready), and "shutdown" (not stopping).
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.metricsHandler())
	mux.Handle("/healthz", m.healthzHandler())
	mux.Handle("/readyz", m.readyzHandler())
	return mux
}

func (m *Manager) metricsHandler() http.Handler {
	h := promhttp.HandlerFor(m.opts.Gatherer, promhttp.HandlerOpts{ErrorLog: slogPrinter{m}})
	if m.opts.WrapMetrics != nil {
		return m.opts.WrapMetrics(h)
	}
	return h
}

func (m *Manager) healthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		checks := []namedCheck{{"ping", func(*http.Request) error { return nil }}}
		if el, ok := m.opts.LeaderElection.(interface{ Status() leaderelection.Status }); ok {
			checks = append(checks, namedCheck{"leader-election", func(*http.Request) error { return el.Status().Stalled }})
		}
		checks = append(checks, m.healthz...)
		m.mu.Unlock()
		serveChecks(w, r, checks)
	})
}

func (m *Manager) readyzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		checks := []namedCheck{
			{"caches", func(*http.Request) error {
				if !m.synced.Load() {
					return errNotSynced
				}
				return nil
			}},
		}
		if m.opts.LeaderElection != nil {
			checks = append(checks, namedCheck{"leader-election", func(*http.Request) error {
				if !m.electing.Load() {
					return errNotElecting
				}
				return nil
			}})
		}
		checks = append(checks, namedCheck{"shutdown", func(*http.Request) error {
			if m.stopping.Load() {
				return errStopping
			}
			return nil
		}})
		checks = append(checks, m.readyz...)
		reports := append([]func() string(nil), m.readyzReports...)
		m.mu.Unlock()
		serveChecks(w, r, checks, reports...)
	})
}

func serveChecks(w http.ResponseWriter, r *http.Request, checks []namedCheck, reports ...func() string) {
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if err := c.check(r); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	for _, report := range reports {
		text := report()
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		b.WriteString("\n" + text)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, b.String())
		return
	}
	if _, verbose := r.URL.Query()["verbose"]; verbose {
		fmt.Fprint(w, b.String())
	}
	fmt.Fprint(w, "ok\n")
}

// slogPrinter routes promhttp's error log into the manager's logger.
type slogPrinter struct{ m *Manager }

func (p slogPrinter) Println(v ...any) { p.m.log.Error("Serving metrics", "err", fmt.Sprint(v...)) }
