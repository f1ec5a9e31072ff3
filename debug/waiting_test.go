package debug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/kloopfake"
	"github.com/kloop-dev/kloop/samples/foo"
	"github.com/kloop-dev/kloop/testenv/await"
)

// runWaitingForFoo runs the Foo controller's App, with WaitForKinds and
// the debug page, on kloopfake's server, which serves the built-in kinds
// but not Foo, and returns it once its caches have synced, the Deployment
// informer is watching and the page is served.
//
// Synced is not yet watching: an informer lists, is synced, and then opens
// its watch ("connecting", amber). An event of a Deployment created after
// the sync comes through the open watch, so once the informer has passed
// it on, it is watching.
func runWaitingForFoo(t *testing.T) *kloop.App {
	t.Helper()
	srv, err := kloopfake.NewServer(kloopfake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	app, err := kloop.New(srv.Config(), kloop.Options{Name: foo.ControllerName, Scheme: foo.Scheme(), WaitForKinds: true,
		Logger: quiet(), Registry: prometheus.NewRegistry(), DebugAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := foo.Setup(app, 1); err != nil {
		t.Fatal(err)
	}
	deps := kloop.Objects[*appsv1.Deployment](app)
	const probe = "watch-probe"
	seen := make(chan struct{})
	var once sync.Once
	if _, err := deps.Informer().AddHandler(informer.HandlerFuncs[*appsv1.Deployment]{AddFunc: func(d *appsv1.Deployment, _ bool) {
		if d.Name == probe {
			once.Do(func() { close(seen) })
		}
	}}, informer.HandlerOptions{Name: "watch-probe"}); err != nil {
		t.Fatal(err)
	}
	await.Run(t, "App.Run", app.Run)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := app.Factory().WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := deps.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: probe}}); err != nil {
		t.Fatal(err)
	}
	await.Closed(t, "the Deployment informer to pass on a Deployment created after its sync", seen)
	await.Closed(t, "the debug server bound", app.Debug().AddrReady())
	return app
}

// An App told to wait for kinds (kloop.Options.WaitForKinds) whose Foo CRD
// is not installed: the snapshot shows the Foo informer "waiting", amber
// (warn) in its row and its state badge, with the kind named, not red as
// an informer backing off after an error; the other informers stay green.
func TestSnapshot_AnInformerWaitingForItsKindIsAmberNotRed(t *testing.T) {
	app := runWaitingForFoo(t)
	resp, err := http.Get(app.Debug().URL(debug.SnapshotPath))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET snapshot: %d, %v", resp.StatusCode, err)
	}
	var snap struct {
		Informers []struct {
			Resource, State, StateLevel, Level, Error string
			Synced                                    bool
			Trouble                                   []string
		}
	}
	if err := json.Unmarshal(b, &snap); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, inf := range snap.Informers {
		if !strings.HasPrefix(inf.Resource, "foos.") {
			if inf.Level != debug.LevelOK || inf.StateLevel != debug.LevelOK {
				t.Errorf("informer %s: level %q, state level %q; want ok (its kind is served)", inf.Resource, inf.Level, inf.StateLevel)
			}
			continue
		}
		seen++
		if !inf.Synced || inf.State != "waiting" || inf.StateLevel != debug.LevelWarn || inf.Level != debug.LevelWarn {
			t.Errorf("Foo informer: synced %v, state %q, state level %q, level %q; want synced, waiting, warn, warn", inf.Synced, inf.State, inf.StateLevel, inf.Level)
		}
		if !strings.Contains(inf.Error, "waiting for kind Foo") || len(inf.Trouble) != 1 || !strings.Contains(inf.Trouble[0], "waiting for kind Foo") {
			t.Errorf("Foo informer: error %q, trouble %q; want the kind waited for named", inf.Error, inf.Trouble)
		}
	}
	if seen != 1 {
		t.Errorf("%d Foo informers in the snapshot, want 1: %s", seen, b)
	}
}

// On the page, the informer waiting for its kind is amber: its row and its
// "waiting" badge have the class warn, and the row of a served kind's
// informer has none of trouble.
func TestPage_InChromium_ShowsAnInformerWaitingForItsKindAmber(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Chromium (not run with -short)")
	}
	tab := browser(t)
	app := runWaitingForFoo(t)
	if err := chromedp.Do(tab, chromedp.Navigate(app.Debug().URL(debug.PagePath))); err != nil {
		t.Fatalf("open %s: %v", app.Debug().URL(debug.PagePath), err)
	}
	row := func(resource string) string {
		return fmt.Sprintf(`(r => r && { row: r.className, state: r.querySelector('[data-field="state"]').textContent.trim(),
			badge: r.querySelector('[data-field="state"] .badge').className, error: r.querySelector('[data-field="error"]').textContent })
			(document.querySelector('tr[data-resource="%s"]'))`, resource)
	}
	foos, deps := row(fooResource), row(deploymentResource)
	until(t, tab, 30*time.Second, "the Foo informer waiting, amber (warn), naming its kind", fmt.Sprintf(
		`%[1]s && %[1]s.row === "warn" && %[1]s.state === "waiting" && %[1]s.badge === "badge warn" && %[1]s.error.includes("waiting for kind Foo")`, foos), foos)
	until(t, tab, 10*time.Second, "the Deployment informer watching, green", fmt.Sprintf(
		`%[1]s && %[1]s.row === "ok" && %[1]s.state === "watching" && %[1]s.badge === "badge ok"`, deps), deps)
}
