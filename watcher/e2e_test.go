package watcher_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kloop-dev/kloop/testenv"
	"github.com/kloop-dev/kloop/watcher"
)

// End-to-end tests against a real etcd and kube-apiserver (package testenv;
// build them with `make controlplane`). Skipped with -short.

const e2eLabel = "kloop.dev/e2e=watch"

// spy records the calls a reflector makes through a ListerWatcher.
type spy[T watcher.Object] struct {
	mu    sync.Mutex
	calls []string
}

func (s *spy[T]) wrap(lw watcher.ListerWatcher[T]) watcher.ListerWatcher[T] {
	return watcher.Funcs[T]{
		ListFunc: func(ctx context.Context, o metav1.ListOptions) (watcher.ListPage[T], error) {
			s.record(fmt.Sprintf("list rv=%q limit=%d continue=%t", o.ResourceVersion, o.Limit, o.Continue != ""))
			return lw.List(ctx, o)
		},
		WatchFunc: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			kind := "watch"
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				kind = "watch-list"
			}
			s.record(fmt.Sprintf("%s rv=%q", kind, o.ResourceVersion))
			return lw.Watch(ctx, o)
		},
	}
}

func (s *spy[T]) record(c string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *spy[T]) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// live is a reflector running against the API server, its events on a channel.
type live[T watcher.Object] struct {
	t      *testing.T
	r      *watcher.Reflector[T]
	events chan watcher.Event[T]
	errs   chan error
	stop   func()
}

func runLive[T watcher.Object](t *testing.T, lw watcher.ListerWatcher[T], cfg watcher.Options) *live[T] {
	t.Helper()
	l := &live[T]{t: t, events: make(chan watcher.Event[T], 10000), errs: make(chan error, 100)}
	cfg.Logger = quiet()
	cfg.Registerer = prometheus.NewRegistry()
	cfg.OnError = func(err error) {
		select {
		case l.errs <- err:
		default:
		}
	}
	l.r = watcher.NewReflector(lw, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- l.r.Run(ctx, func(e watcher.Event[T]) {
			select {
			case l.events <- e:
			case <-ctx.Done():
			}
		})
	}()
	var once sync.Once
	l.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of cancel")
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// next returns the next event that is not a bookmark.
func (l *live[T]) next(what string, within time.Duration) watcher.Event[T] {
	l.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case e := <-l.events:
			if e.Type != watcher.Bookmark {
				return e
			}
		case <-timeout:
			l.t.Fatalf("no event within %v while waiting for %s (last error: %v)", within, what, l.r.LastError())
		}
	}
}

// snapshot waits for a complete snapshot and returns names → resourceVersions.
func (l *live[T]) snapshot(within time.Duration) (map[string]string, string) {
	l.t.Helper()
	if e := l.next("RelistStart", within); e.Type != watcher.RelistStart {
		l.t.Fatalf("got %s, want RelistStart", e.Type)
	}
	items := map[string]string{}
	for {
		e := l.next("the rest of the snapshot", within)
		switch e.Type {
		case watcher.RelistItem:
			items[e.Object.GetName()] = e.ResourceVersion
		case watcher.RelistDone:
			if e.ResourceVersion == "" {
				l.t.Fatalf("RelistDone without a resourceVersion")
			}
			return items, e.ResourceVersion
		default:
			l.t.Fatalf("got %s inside a snapshot", e.Type)
		}
	}
}

func rvNum(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not numeric: %v", rv, err)
	}
	return n
}

func newNamespace(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string, cms ...string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	for _, n := range cms {
		createCM(t, ctx, cs, name, n)
	}
}

func createCM(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"kloop.dev/e2e": "watch"}},
		Data:       map[string]string{"v": "1"},
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
}

func e2eContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	env := testenv.StartT(t, testenv.Options{})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ListsAndWatchesConfigMapsInEveryInitialListMode", func(t *testing.T) {
		for _, mode := range []watcher.InitialListMode{watcher.InitialListAuto, watcher.InitialListStreaming, watcher.InitialListPaginated} {
			t.Run(mode.String(), func(t *testing.T) {
				ctx := e2eContext(t, 2*time.Minute)
				ns := "watch-modes-" + map[watcher.InitialListMode]string{watcher.InitialListAuto: "auto", watcher.InitialListStreaming: "streaming", watcher.InitialListPaginated: "paginated"}[mode]
				newNamespace(t, ctx, cs, ns, "a", "b", "c", "d", "e")
				// Not labelled: the selector must keep it out.
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}

				var s spy[*corev1.ConfigMap]
				lw := s.wrap(watcher.FromClient[*corev1.ConfigMap](cs.CoreV1().ConfigMaps(ns), watcher.Scope{LabelSelector: e2eLabel}))
				l := runLive(t, lw, watcher.Options{Name: "configmaps", InitialList: mode, PageSize: 2})

				items, rv := l.snapshot(time.Minute)
				if got := slices.Sorted(maps.Keys(items)); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
					t.Fatalf("snapshot names %v, want a..e", got)
				}
				if l.r.Status().ResourceVersion == "" || l.r.LastError() != nil {
					t.Fatalf("after sync: Status().ResourceVersion %q, LastError %v", l.r.Status().ResourceVersion, l.r.LastError())
				}

				createCM(t, ctx, cs, ns, "f")
				upd, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				upd.Data["v"] = "2"
				if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				last := rvNum(t, rv)
				for _, want := range []struct {
					typ  watcher.EventType
					name string
				}{{watcher.Added, "f"}, {watcher.Modified, "a"}, {watcher.Deleted, "b"}} {
					e := l.next(fmt.Sprintf("%s %s", want.typ, want.name), 30*time.Second)
					if e.Type != want.typ || e.Object.GetName() != want.name {
						t.Fatalf("event %s %s, want %s %s", e.Type, e.Object.GetName(), want.typ, want.name)
					}
					if n := rvNum(t, e.ResourceVersion); n <= last {
						t.Fatalf("%s %s at rv %d, not after %d", e.Type, e.Object.GetName(), n, last)
					} else {
						last = n
					}
				}

				calls := s.snapshot()
				switch mode {
				case watcher.InitialListPaginated:
					// A list at "0" with a limit; the watch cache may answer it in
					// one page (it ignores limits at "0") or page it. Then a
					// plain watch from the list's resourceVersion.
					t.Logf("calls: %q", calls)
					if len(calls) < 2 || calls[0] != `list rv="0" limit=2 continue=false` || calls[len(calls)-1] != fmt.Sprintf("watch rv=%q", rv) {
						t.Fatalf("calls %q, want a list at \"0\" limit 2, its continuations, a watch at %s", calls, rv)
					}
					for _, c := range calls[1 : len(calls)-1] {
						if c != `list rv="" limit=2 continue=true` {
							t.Fatalf("call %q in %q, want only continuations between the first list and the watch", c, calls)
						}
					}
				default:
					// One streaming list, then a plain watch from its end.
					if want := []string{`watch-list rv=""`, fmt.Sprintf("watch rv=%q", rv)}; !slices.Equal(calls, want) {
						t.Fatalf("calls %q, want %q", calls, want)
					}
				}
			})
		}
	})

	// Why the reflector leaves a streaming list's stream once the initial
	// events are in: the server compresses that stream, event by event, for
	// as long as it stays open, and never compresses a plain watch.
	t.Run("ServerCompressesStreamingListsButNotPlainWatches", func(t *testing.T) {
		ctx := e2eContext(t, time.Minute)
		ns := "watch-gzip"
		newNamespace(t, ctx, cs, ns, "a")
		hc, err := rest.HTTPClientFor(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		encoding := func(query string) string {
			t.Helper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet,
				env.Config.Host+"/api/v1/namespaces/"+ns+"/configmaps?watch=true&timeoutSeconds=1&"+query, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Set by hand, so the transport neither asks nor decompresses.
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET ?%s: %s", query, resp.Status)
			}
			return resp.Header.Get("Content-Encoding")
		}
		if got := encoding("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"); got != "gzip" {
			t.Fatalf("streaming list Content-Encoding = %q, want gzip", got)
		}
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := encoding("allowWatchBookmarks=true&resourceVersion=" + list.ResourceVersion); got != "" {
			t.Fatalf("plain watch Content-Encoding = %q, want none", got)
		}
	})

	t.Run("ForbiddenSurfacesThroughLastErrorAndOnError", func(t *testing.T) {
		cfg, err := env.UserConfig("nobody")
		if err != nil {
			t.Fatal(err)
		}
		nobody, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		l := runLive(t, watcher.FromClient[*corev1.ConfigMap](nobody.CoreV1().ConfigMaps("default"), watcher.Scope{}), watcher.Options{Name: "configmaps"})
		select {
		case err := <-l.errs:
			var oe *watcher.OpError
			if !apierrors.IsForbidden(err) || !errors.As(err, &oe) || oe.Op != watcher.OpList {
				t.Fatalf("first error %v, want a forbidden list *OpError (the watch-list 403 falls back to LIST)", err)
			}
			t.Logf("reported: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no error reported within 30s for a user without RBAC")
		}
		if !apierrors.IsForbidden(l.r.LastError()) {
			t.Fatalf("LastError = %v, want forbidden", l.r.LastError())
		}
	})

	t.Run("DynamicMetadataAndRESTListerWatchers", func(t *testing.T) {
		ctx := e2eContext(t, 2*time.Minute)
		ns := "watch-clients"
		newNamespace(t, ctx, cs, ns, "x", "y")
		opts := watcher.Scope{Namespace: ns, LabelSelector: e2eLabel}
		dyn, err := dynamic.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		md, err := metadata.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		rest, err := watcher.FromResource[*corev1.ConfigMap](env.Config, kscheme.Scheme, cmGVR, opts)
		if err != nil {
			t.Fatal(err)
		}
		clientOpts := opts
		clientOpts.Namespace = "" // the client's
		ld := runLive(t, watcher.FromClient[*unstructured.Unstructured](dyn.Resource(cmGVR).Namespace(opts.Namespace), clientOpts), watcher.Options{})
		lm := runLive(t, watcher.FromClient[*metav1.PartialObjectMetadata](md.Resource(cmGVR).Namespace(opts.Namespace), clientOpts), watcher.Options{})
		lr := runLive(t, rest, watcher.Options{})

		want := []string{"x", "y"}
		d, _ := ld.snapshot(time.Minute)
		m, _ := lm.snapshot(time.Minute)
		r, _ := lr.snapshot(time.Minute)
		for name, got := range map[string]map[string]string{"dynamic": d, "metadata": m, "rest": r} {
			if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
				t.Errorf("%s snapshot %v, want %v", name, names, want)
			}
		}
		// A type of a named API group goes through /apis, as a CRD does.
		if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "holder"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		leases, err := watcher.FromResource[*coordinationv1.Lease](env.Config, kscheme.Scheme, coordinationv1.SchemeGroupVersion.WithResource("leases"), watcher.Scope{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := runLive(t, leases, watcher.Options{}).snapshot(time.Minute); len(got) != 1 || got["holder"] == "" {
			t.Errorf("lease snapshot %v, want the one lease", got)
		}

		createCM(t, ctx, cs, ns, "z")
		if e := ld.next("Added z", 30*time.Second); e.Type != watcher.Added || e.Object.GetName() != "z" || e.Object.Object["data"] == nil {
			t.Errorf("dynamic: %s %s (data %v), want Added z with its data", e.Type, e.Object.GetName(), e.Object.Object["data"])
		}
		if e := lm.next("Added z", 30*time.Second); e.Type != watcher.Added || e.Object.GetName() != "z" {
			t.Errorf("metadata: %s %s, want Added z", e.Type, e.Object.GetName())
		}
		if e := lr.next("Added z", 30*time.Second); e.Type != watcher.Added || e.Object.GetName() != "z" || e.Object.Data["v"] != "1" {
			t.Errorf("rest: %s %s, want Added z with its data", e.Type, e.Object.GetName())
		}
	})

	// Last: it restarts the API server.
	t.Run("RelistsAfterCompactionMakesTheResourceVersionGone", func(t *testing.T) {
		ctx := e2eContext(t, 3*time.Minute)
		ns := "watch-compaction"
		newNamespace(t, ctx, cs, ns, "p", "q")
		newNamespace(t, ctx, cs, "watch-compaction-other")
		opts := watcher.Scope{LabelSelector: e2eLabel}
		streaming := runLive(t, watcher.FromClient[*corev1.ConfigMap](cs.CoreV1().ConfigMaps(ns), opts), watcher.Options{InitialList: watcher.InitialListStreaming})
		var s spy[*corev1.ConfigMap]
		paginated := runLive(t, s.wrap(watcher.FromClient[*corev1.ConfigMap](cs.CoreV1().ConfigMaps(ns), opts)), watcher.Options{InitialList: watcher.InitialListPaginated, PageSize: 1})
		_, rvS := streaming.snapshot(time.Minute)
		_, rvP := paginated.snapshot(time.Minute)

		// A write the reflectors do not see moves etcd past their
		// resourceVersions; compaction then removes the history they would
		// resume from, and the restarted API server's cache starts after it.
		createCM(t, ctx, cs, "watch-compaction-other", "bump")
		rev, err := env.CompactAndRestart(ctx)
		if err != nil {
			t.Fatalf("compact and restart: %v", err)
		}
		t.Logf("compacted at %d; reflectors were at %s and %s", rev, rvS, rvP)
		if uint64(rev) <= rvNum(t, rvS) || uint64(rev) <= rvNum(t, rvP) {
			t.Fatalf("compaction revision %d does not pass the reflectors' resourceVersions", rev)
		}

		for name, l := range map[string]*live[*corev1.ConfigMap]{"streaming": streaming, "paginated": paginated} {
			items, rv := l.snapshot(90 * time.Second)
			if names := slices.Sorted(maps.Keys(items)); !slices.Equal(names, []string{"p", "q"}) {
				t.Errorf("%s: relist snapshot %v, want p, q", name, names)
			}
			if rvNum(t, rv) < uint64(rev) {
				t.Errorf("%s: relist at rv %s, older than the compaction at %d", name, rv, rev)
			}
			if err := l.r.LastError(); err != nil {
				t.Errorf("%s: LastError after the relist = %v, want nil", name, err)
			}
		}
		// With the pinned API server the relist after the 410 is a
		// consistent read from etcd, paged by 1 with continue tokens.
		calls := s.snapshot()
		t.Logf("paginated reflector calls: %q", calls)
		if !slices.Contains(calls, `list rv="" limit=1 continue=true`) {
			t.Errorf("paginated relist made no continuation call: %q", calls)
		}
		// And the watches work again.
		createCM(t, ctx, cs, ns, "r")
		for name, l := range map[string]*live[*corev1.ConfigMap]{"streaming": streaming, "paginated": paginated} {
			if e := l.next("Added r", 30*time.Second); e.Type != watcher.Added || e.Object.GetName() != "r" {
				t.Errorf("%s: %s %s after the relist, want Added r", name, e.Type, e.Object.GetName())
			}
		}
	})
}

func TestE2E_FallsBackToPaginatedListWhenTheServerHasNoWatchList(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	env := testenv.StartT(t, testenv.Options{APIServerFlags: []string{"--feature-gates=WatchList=false"}})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := e2eContext(t, 2*time.Minute)
	newNamespace(t, ctx, cs, "watch-fallback", "a", "b")

	var s spy[*corev1.ConfigMap]
	lw := s.wrap(watcher.FromClient[*corev1.ConfigMap](cs.CoreV1().ConfigMaps("watch-fallback"), watcher.Scope{LabelSelector: e2eLabel}))
	l := runLive(t, lw, watcher.Options{})
	items, rv := l.snapshot(time.Minute)
	if names := slices.Sorted(maps.Keys(items)); !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("snapshot %v, want a, b", names)
	}
	createCM(t, ctx, cs, "watch-fallback", "c")
	if e := l.next("Added c", 30*time.Second); e.Type != watcher.Added || e.Object.Name != "c" {
		t.Fatalf("%s %s, want Added c", e.Type, e.Object.Name)
	}
	want := []string{`watch-list rv=""`, `list rv="0" limit=500 continue=false`, fmt.Sprintf("watch rv=%q", rv)}
	if calls := s.snapshot(); !slices.Equal(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
	if l.r.LastError() != nil {
		t.Fatalf("the fallback is not an error; LastError = %v", l.r.LastError())
	}
}
