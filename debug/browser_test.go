package debug_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	runtimedebug "runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/kloop-dev/kloop/internal/testwait"

	"github.com/chromedp/chromedp"

	"github.com/kloop-dev/kloop"
	"github.com/kloop-dev/kloop/debug"
	"github.com/kloop-dev/kloop/informer"
	"github.com/kloop-dev/kloop/manager"
	"github.com/kloop-dev/kloop/sharding"
	"github.com/kloop-dev/kloop/testenv"
)

// ChromiumEnv overrides where the browser test finds Chromium (default
// /usr/bin/chromium, Debian's package "chromium").
const ChromiumEnv = "KLOOP_CHROMIUM"

var screenshot = flag.String("screenshot", "", "write the browser test's screenshot of the page here (make screenshot: docs/debug-page.png)")

// browser starts headless Chromium for the test and returns a tab; the
// browser is stopped (and its profile removed) when the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv(ChromiumEnv)
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Fatalf("no Chromium at %s (%v): install Debian's chromium package (apt-get install chromium), or set %s", path, err, ChromiumEnv)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1440, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first call starts the browser, which lives as long as the
	// context of that call: no timeout on it.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return tab
}

// helpers are defined in the page once it has loaded; the test's
// predicates read the page through them, as a person reads it.
const helpers = `
window.kt = {
  informer(resource) {
    const r = document.querySelector('tr[data-resource="' + resource + '"]');
    if (!r) return null;
    const f = n => r.querySelector('[data-field="' + n + '"]');
    return { state: f("state").dataset.state, synced: f("state").dataset.synced === "true",
      shown: f("state").textContent.trim(), objects: Number(f("objects").textContent.replace(/,/g, "")),
      error: f("error").textContent.trim(), row: r.className };
  },
  reconciles(name) {
    const c = document.querySelector('section[data-controller="' + name + '"] [data-field="reconciles"]');
    return c ? Number(c.textContent.replace(/,/g, "")) : -1;
  },
  failure(name, key) {
    const r = document.querySelector('section[data-controller="' + name + '"] tr[data-error-key="' + key + '"]');
    return r ? r.querySelector('[data-field="message"]').textContent : null;
  },
};
true`

// until polls a JavaScript predicate in the page until it returns a truthy
// value (returned as JSON text), failing the test after timeout with what
// and the page's last state of it.
func until(t *testing.T, tab context.Context, timeout time.Duration, what, predicate, state string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, timeout+10*time.Second)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Poll[string]("(() => { const v = ("+predicate+"); return v ? JSON.stringify(v) : null; })()",
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		last, _ := chromedp.Run(tab, chromedp.Evaluate[string]("JSON.stringify("+state+")"))
		t.Fatalf("the page did not show %s within %v (%v); it shows %s", what, timeout, err, last)
	}
	return got
}

func TestPage_InChromium_ShowsTheFooControllerLive(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane and Chromium (not run with -short)")
	}
	tab := browser(t)
	// A control plane of its own: the test stops its API server.
	env := testenv.StartT(t, testenv.Options{})
	r := newFooRun(t, env, "one", "two", "three")
	if err := chromedp.Do(tab, chromedp.Navigate(r.srv.URL(debug.PagePath))); err != nil {
		t.Fatalf("open %s: %v", r.srv.URL(debug.PagePath), err)
	}
	if ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](helpers)); err != nil || !ok {
		t.Fatalf("install the test's helpers: %v", err)
	}
	foos, deps := fmt.Sprintf("kt.informer(%q)", fooResource), fmt.Sprintf("kt.informer(%q)", deploymentResource)
	both := "[" + foos + ", " + deps + "]"

	// Both informers synced and watching, with the objects the API server
	// holds: three Foos, and the three Deployments the controller made.
	until(t, tab, 60*time.Second, "both informers synced and watching with 3 objects each", fmt.Sprintf(
		`%s.every(i => i && i.synced && i.state === "watching" && i.shown === "watching" && i.objects === 3 && i.error === "")`, both), both)
	if nf, nd := r.counts(t.Context()); nf != 3 || nd != 3 {
		t.Fatalf("the API server holds %d Foos and %d Deployments, the page showed 3 and 3", nf, nd)
	}

	// 20 more Foos: at least 20 more reconciles on the page.
	ctl := fmt.Sprintf("kt.reconciles(%q)", "foo-controller")
	before, err := chromedp.Run(tab, chromedp.Evaluate[int](ctl))
	if err != nil || before < 3 {
		t.Fatalf("reconciles on the page: %d, %v; want at least the 3 initial ones", before, err)
	}
	for i := range 20 {
		r.createFoo(fmt.Sprintf("more-%02d", i), fmt.Sprintf("more-%02d", i))
	}
	until(t, tab, 90*time.Second, fmt.Sprintf("at least %d reconciles", before+20), fmt.Sprintf("%s >= %d", ctl, before+20), ctl)

	// A Foo whose Deployment belongs to someone else: its key and error.
	r.takenDeployment("taken")
	r.createFoo("bad", "taken")
	key := r.ns + "/bad"
	failure := fmt.Sprintf("kt.failure(%q, %q)", "foo-controller", key)
	until(t, tab, 60*time.Second, "the failing Foo's key and error", failure+` && `+failure+`.includes('Resource "taken" already exists and is not managed by Foo')`, failure)

	// The API server goes away: within 10 s both informers stop watching
	// and show why.
	env.StopAPIServer()
	stoppedAt := time.Now()
	got := until(t, tab, 10*time.Second, "both informers not watching, with an error",
		both+`.every(i => i && i.state !== "watching" && i.shown !== "watching" && i.error !== "" && i.row === "bad") && `+both, both)
	t.Logf("%v after the API server stopped the page showed %s", time.Since(stoppedAt).Round(time.Millisecond), got)

	// It comes back: both watch again, without error, with all 24 Foos.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := env.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, tab, 90*time.Second, "both informers watching again without error", fmt.Sprintf(
		`%s.every(i => i && i.state === "watching" && i.error === "" && i.row === "ok") && %s.objects === 24`, both, foos), both)

	// The picture in README.md and docs/debug.md: the page as it is now, sparklines and the
	// failing Foo included.
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 500 {
		t.Fatalf("screenshot is %v, want at least 1000×500", b)
	}
	out := *screenshot
	if out == "" {
		out = t.TempDir() + "/debug-page.png"
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (%v) written to %s", img.Bounds().Size(), out)
	if !strings.HasSuffix(out, ".png") {
		t.Errorf("screenshot path %s does not end in .png", out)
	}
}

// fakeMember is a shard-group member as package sharding reports one.
type fakeMember struct{ st sharding.Status }

func (m fakeMember) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (m fakeMember) Status() sharding.Status         { return m.st }
func (m fakeMember) NeedLeaderElection() bool        { return false }

func TestPage_InChromium_ShowsTheShardTable(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Chromium (not run with -short)")
	}
	tab := browser(t)
	m, err := manager.New(manager.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	member := fakeMember{st: sharding.Status{
		Group: "foo", Identity: "foo-a", Slots: 8, Key: sharding.ByNamespace, Joined: true,
		Scope: []int{0, 1, 2, 5},
		Members: []sharding.MemberStatus{
			{Identity: "foo-a", Self: true, Live: true, Held: []int{0, 1, 2, 5}, Assigned: 4, Age: time.Second},
			{Identity: "foo-b", Held: []int{3, 4}, Draining: []int{4}, Assigned: 4, Age: time.Minute},
		},
		Informers: []sharding.InformerStatus{{Name: "foos [all namespaces]", Objects: 12, Filtering: "server"}},
	}}
	if err := m.Add(member); err != nil {
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
	  const g = document.querySelector('[data-shard-group="foo"]');
	  if (!g) return null;
	  const row = id => { const r = g.querySelector('tr[data-member="' + id + '"]'); return r && { text: r.textContent.replace(/\s+/g, " ").trim(), cls: r.className }; };
	  return { head: g.querySelector(".top").textContent.replace(/\s+/g, " ").trim(), a: row("foo-a"), b: row("foo-b"), cls: g.className,
	    trouble: document.querySelector("#trouble").textContent };
	})()`
	got := until(t, tab, 30*time.Second, "the shard table", `(s => s && s.b ? s : null)(`+table+`)`, table)
	for _, want := range []string{
		`"head":"foo joined 8 slots by namespace · this replica foo-a holds 4: 0-2,5"`,
		`"a":{"text":"foo-a this replica live 4 4 0-2,5 – 1.0s ago","cls":""}`,
		`"b":{"text":"foo-b not live 4 2 3-4 4 60.0s ago","cls":"warn"}`,
		`"cls":"card ctl warn"`,
		`shard group foo: member foo-b is not live but holds 2 slots`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the shard table lacks %s; it shows %s", want, got)
		}
	}
}

func TestPage_InChromium_ShowsWhyAFooWasReconciled(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane and Chromium (not run with -short)")
	}
	tab := browser(t)
	r := newFooRun(t, controlPlane.Env(t), "web")
	if err := chromedp.Do(tab, chromedp.Navigate(r.srv.URL(debug.PagePath))); err != nil {
		t.Fatalf("open %s: %v", r.srv.URL(debug.PagePath), err)
	}
	key := r.ns + "/web"
	// The Foo's first reconcile, woken by the informer's initial list.
	rows := fmt.Sprintf(`[...document.querySelectorAll('section[data-controller="foo-controller"] .why tr[data-reconcile-key="%s"] [data-field="causes"]')].map(c => c.textContent)`, key)
	until(t, tab, 60*time.Second, "a reconcile of "+key+" woken by the Foo's initial list",
		rows+`.some(c => c.includes("For Foo `+key+`@") && c.includes("Added (replay)"))`, rows)

	// The test changes the Foo's replicas: the page names that update,
	// at the resourceVersion the API server gave it, as the cause.
	f, err := r.foos.Get(t.Context(), r.ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	f.Spec.Replicas = &three
	f, err = r.foos.Update(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	cause := fmt.Sprintf("For Foo %s@%s Updated", key, f.ResourceVersion)
	until(t, tab, 60*time.Second, "the reconcile woken by the change: "+cause,
		rows+fmt.Sprintf(`.some(c => c.includes(%q))`, cause), rows)

	// The key's own history, one click away, has it too.
	link := fmt.Sprintf(`section[data-controller="foo-controller"] a.key[data-key="%s"]`, key)
	if ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](fmt.Sprintf(`(a => { if (a) a.click(); return !!a; })(document.querySelector(%q))`, link))); err != nil || !ok {
		t.Fatalf("click the key %s: found %v, %v", key, ok, err)
	}
	hist := fmt.Sprintf(`(b => b ? b.textContent.replace(/\s+/g, " ") : null)(document.querySelector('[data-key-history="%s"]'))`, key)
	got := until(t, tab, 30*time.Second, "the key's history with the change as a cause",
		fmt.Sprintf(`(h => h && h.includes("Why did %s run?") && h.includes(%q) && h.includes("ok") ? h : null)(%s)`, key, cause, hist), hist)
	t.Logf("the key's history shows: %s", got)
}

// The page says which informers keep their cache encoded and why, and the
// Go memory limit the App set and why: here a limit of 3 GiB set by the
// program, under an EncodedUnder of 4 GiB, so the Deployment informer is
// encoded while the Foo informer, whose type has no protobuf, stays decoded.
func TestPage_InChromium_ShowsEachCacheAndTheMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane and Chromium (not run with -short)")
	}
	before := runtimedebug.SetMemoryLimit(-1)
	t.Cleanup(func() { runtimedebug.SetMemoryLimit(before) })
	tab := browser(t)
	r := newFooRunWith(t, controlPlane.Env(t), func(o *kloop.Options) {
		o.MemoryLimit = 3 << 30
		o.Memory = informer.Memory{EncodedUnder: 4 << 30}
	}, "web")
	if err := chromedp.Do(tab, chromedp.Navigate(r.srv.URL(debug.PagePath))); err != nil {
		t.Fatalf("open %s: %v", r.srv.URL(debug.PagePath), err)
	}
	cache := func(resource string) string {
		return fmt.Sprintf(`(() => { const c = document.querySelector('tr[data-resource="%s"] [data-field="cacheBytes"]');
			return c && { encoded: c.dataset.encoded === "true", shown: c.textContent.trim(), why: c.title }; })()`, resource)
	}
	deps, foos := cache(deploymentResource), cache(fooResource)
	until(t, tab, 60*time.Second, "the Deployment informer's cache encoded, because 3 GiB is under EncodedUnder", fmt.Sprintf(
		`%[1]s && %[1]s.encoded && %[1]s.shown.startsWith("encoded ") && %[1]s.why.includes("3221225472 bytes") && %[1]s.why.includes("is under Memory.EncodedUnder")`, deps), deps)
	until(t, tab, 10*time.Second, "the Foo informer's cache decoded, saying its type has no protobuf", fmt.Sprintf(
		`%[1]s && !%[1]s.encoded && !%[1]s.shown.includes("encoded") && %[1]s.why.includes("but the decoded cache") && %[1]s.why.includes("protobuf")`, foos), foos)
	limit := `(() => { const m = document.querySelector('#meta [data-field="memoryLimit"]'); return m && { bytes: Number(m.dataset.bytes), shown: m.textContent, why: m.title }; })()`
	until(t, tab, 10*time.Second, "the Go memory limit of 3 GiB, set by the program", fmt.Sprintf(
		`%[1]s && %[1]s.bytes === %d && %[1]s.shown === "Go memory limit 3.0 GiB" && %[1]s.why.includes("set by the program")`, limit, 3<<30), limit)
}
