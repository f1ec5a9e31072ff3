package manager_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/manager"
)

func TestReadyz_ReportsFollowTheChecksWhenVerboseOrFailing(t *testing.T) {
	m, err := manager.New(manager.Options{})
	if err != nil {
		t.Fatal(err)
	}
	failing := false
	m.AddReadyzCheck("thing", func(*http.Request) error {
		if failing {
			return errors.New("broken")
		}
		return nil
	})
	m.AddReadyzReport(func() string { return "TABLE\nrow 1" })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	// Not started: caches are not synced, so /readyz fails and shows the report.
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "\nTABLE\nrow 1\n") {
		t.Fatalf("failing /readyz: %d %q; want 503 with the report", code, body)
	}
	failing = true
	code, body = get("/readyz?verbose")
	if !strings.Contains(body, "[-]thing failed: broken\n") || !strings.HasSuffix(body, "\nTABLE\nrow 1\n") {
		t.Fatalf("verbose /readyz: %d %q", code, body)
	}
}
