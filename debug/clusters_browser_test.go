package debug_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/internal/testwait"
	"github.com/kloop-dev/kloop/manager"
)

// fakeFleet is a fleet App's runnable as the debug page reads it.
type fakeFleet struct{ cs []debug.ClusterStatus }

func (f fakeFleet) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (f fakeFleet) Clusters() []debug.ClusterStatus { return f.cs }
func (f fakeFleet) NeedLeaderElection() bool        { return false }

func TestPage_InChromium_ListsTheFleetsClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Chromium (not run with -short)")
	}
	tab := browser(t)
	m, err := manager.New(manager.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	if err := m.Add(fakeFleet{cs: []debug.ClusterStatus{
		{Name: "east", Origin: "home", State: "joined", Since: since, Objects: 42},
		{Name: "west", Origin: "Secret fleet/west", State: "failed", Since: since, Err: errors.New("x509: certificate signed by unknown authority")},
	}}); err != nil {
		t.Fatal(err)
	}
	srv, err := debug.New(m, debug.Options{Addr: "127.0.0.1:0", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Run(t, "the debug server's Start", srv.Start)
	testwait.Closed(t, "the debug server to bind", srv.AddrReady())
	if err := chromedp.Do(tab, chromedp.Navigate(srv.URL(debug.PagePath))); err != nil {
		t.Fatalf("open %s: %v", srv.URL(debug.PagePath), err)
	}
	table := `(() => {
	  const row = id => { const r = document.querySelector('tr[data-cluster="' + id + '"]'); return r && { text: r.textContent.replace(/\s+/g, " ").trim(), cls: r.className }; };
	  return { east: row("east"), west: row("west"), trouble: document.querySelector("#trouble").textContent };
	})()`
	got := until(t, tab, 30*time.Second, "the cluster table", `(s => s && s.west ? s : null)(`+table+`)`, table)
	for _, want := range []string{
		`"east":{"text":"east joined 42`,
		`home`,
		`"west":{"text":"west failed 0`,
		`Secret fleet/west x509: certificate signed by unknown authority","cls":"bad"}`,
		`cluster west: failed: x509: certificate signed by unknown authority`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the cluster table lacks %s; it shows %s", want, got)
		}
	}
}
