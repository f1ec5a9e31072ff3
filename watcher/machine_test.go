package watcher

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// The tests in this file drive the pure core step by step: each input is the
// result of the call the core asked for, and each step checks the events it
// emitted and the next action it asks for.

type cm = *corev1.ConfigMap

func obj(name, rv string) cm {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func bookmark(rv string, initialEventsEnd bool) cm {
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if initialEventsEnd {
		b.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return b
}

var (
	gr           = schema.GroupResource{Resource: "configmaps"}
	errGone      = apierrors.NewResourceExpired("too old resource version: 5 (10)")
	errGone410   = apierrors.NewGone("gone")
	errInternal  = apierrors.NewInternalError(errors.New("etcd hiccup"))
	errForbid    = apierrors.NewForbidden(gr, "", errors.New(`User "bob" cannot list resource "configmaps"`))
	errInvalid   = apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", nil)
	errStoreRead = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonStoreReadError,
		Message: "saw a DELETED event, but object data is corrupt - object not decodable revision=12: bad"}}
	errTooLarge = func() error {
		e := apierrors.NewTimeoutError("Too large resource version", 1)
		e.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
		return e
	}()
)

func statusEvent(err error) apiwatch.Event {
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		panic("not a status error")
	}
	st := se.ErrStatus
	return apiwatch.Event{Type: apiwatch.Error, Object: &st}
}

// harness drives a machine with a manual clock and a scripted random source.
type harness struct {
	t    *testing.T
	m    *machine[cm]
	now  time.Time
	rand []float64 // consumed by the machine; 0.5 when empty
}

func newHarness(t *testing.T, cfg Options) *harness {
	t.Helper()
	h := &harness{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if cfg.Rand == nil {
		cfg.Rand = func() float64 {
			if len(h.rand) == 0 {
				return 0.5
			}
			r := h.rand[0]
			h.rand = h.rand[1:]
			return r
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Name == "" {
		cfg.Name = "configmaps"
	}
	h.m = newMachine[cm](cfg.resolve("unused"))
	return h
}

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

// render turns events into compact strings: "RelistItem a@5", "RelistDone @10".
func render(evs []Event[cm]) []string {
	var out []string
	for _, e := range evs {
		s := e.Type.String()
		if e.Object != nil {
			s += " " + e.Object.Name
		}
		if e.ResourceVersion != "" {
			if e.Object == nil {
				s += " "
			}
			s += "@" + e.ResourceVersion
		}
		out = append(out, s)
	}
	return out
}

func (h *harness) expectEvents(got []Event[cm], want ...string) {
	h.t.Helper()
	if g := render(got); !slices.Equal(g, want) {
		h.t.Fatalf("events:\n got  %q\n want %q", g, want)
	}
}

func (h *harness) expectAct(kind actionKind) action {
	h.t.Helper()
	if h.m.act.kind != kind {
		h.t.Fatalf("next action = %s %+v, want %s", h.m.act.kind, h.m.act, kind)
	}
	return h.m.act
}

// expectList checks the next action is a LIST with these parameters.
func (h *harness) expectList(rv string, limit int64, cont string) {
	h.t.Helper()
	a := h.expectAct(actList)
	o := a.opts
	if o.ResourceVersion != rv || o.Limit != limit || o.Continue != cont || o.Watch || o.SendInitialEvents != nil || o.ResourceVersionMatch != "" {
		h.t.Fatalf("list options = rv %q limit %d continue %q (%+v), want rv %q limit %d continue %q", o.ResourceVersion, o.Limit, o.Continue, o, rv, limit, cont)
	}
}

// expectStream checks the next action opens a streaming list at rv.
func (h *harness) expectStream(rv string) {
	h.t.Helper()
	a := h.expectAct(actWatch)
	o := a.opts
	if a.op != opWatchList || o.ResourceVersion != rv || o.SendInitialEvents == nil || !*o.SendInitialEvents ||
		o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan || !o.AllowWatchBookmarks || o.TimeoutSeconds == nil {
		h.t.Fatalf("streaming list options = %+v (op %s), want rv %q, sendInitialEvents, NotOlderThan, bookmarks, timeout", o, a.op, rv)
	}
}

// expectWatch checks the next action opens a plain watch from rv.
func (h *harness) expectWatch(rv string) {
	h.t.Helper()
	a := h.expectAct(actWatch)
	o := a.opts
	if a.op != opWatch || o.ResourceVersion != rv || o.SendInitialEvents != nil || o.ResourceVersionMatch != "" || !o.AllowWatchBookmarks || o.TimeoutSeconds == nil {
		h.t.Fatalf("watch options = %+v (op %s), want rv %q with bookmarks and a timeout", o, a.op, rv)
	}
}

// expectWait checks the next action is a wait within [lo, hi] and lets it pass.
func (h *harness) expectWait(lo, hi time.Duration) time.Duration {
	h.t.Helper()
	a := h.expectAct(actWait)
	if a.delay < lo || a.delay > hi {
		h.t.Fatalf("wait %v, want within [%v, %v]", a.delay, lo, hi)
	}
	h.advance(a.delay)
	if err := h.m.timerFired(h.now); err != nil {
		h.t.Fatalf("timer fired: unexpected error %v", err)
	}
	return a.delay
}

func (h *harness) list(page ListPage[cm], err error) ([]Event[cm], error) {
	h.t.Helper()
	h.expectAct(actList)
	return h.m.listed(h.now, page, err)
}

func (h *harness) listOK(page ListPage[cm]) []Event[cm] {
	h.t.Helper()
	evs, err := h.list(page, nil)
	if err != nil {
		h.t.Fatalf("listed: unexpected error %v", err)
	}
	return slices.Clone(evs)
}

func (h *harness) open(err error) error {
	h.t.Helper()
	h.expectAct(actWatch)
	return h.m.watchOpened(h.now, err)
}

func (h *harness) openOK() {
	h.t.Helper()
	if err := h.open(nil); err != nil {
		h.t.Fatalf("watch opened: unexpected error %v", err)
	}
}

func (h *harness) recv(typ apiwatch.EventType, o cm) []Event[cm] {
	h.t.Helper()
	h.expectAct(actReceive)
	evs, err := h.m.received(h.now, apiwatch.Event{Type: typ, Object: o})
	if err != nil {
		h.t.Fatalf("received %s: unexpected error %v", typ, err)
	}
	return slices.Clone(evs)
}

func (h *harness) recvErr(err error) error {
	h.t.Helper()
	h.expectAct(actReceive)
	evs, rerr := h.m.received(h.now, statusEvent(err))
	if len(evs) != 0 {
		h.t.Fatalf("error event emitted %q", render(evs))
	}
	return rerr
}

func (h *harness) close() error {
	h.t.Helper()
	h.expectAct(actReceive)
	return h.m.closed(h.now)
}

func page(rv, cont string, items ...cm) ListPage[cm] {
	return ListPage[cm]{Items: items, ResourceVersion: rv, Continue: cont}
}

// syncByList runs a paginated initial list of one page at rv and opens the watch.
func (h *harness) syncByList(rv string, items ...cm) {
	h.t.Helper()
	evs := h.listOK(page(rv, "", items...))
	if len(evs) != len(items)+2 || evs[len(evs)-1].Type != RelistDone {
		h.t.Fatalf("sync by list: events %q", render(evs))
	}
	h.expectWatch(rv)
	h.openOK()
}

func TestMachine_PaginatedList_EmitsEachPageThenWatchesFromTheListRV(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})

	h.expectList("0", 500, "")
	h.expectEvents(h.listOK(page("10", "c1", obj("a", "3"), obj("b", "7"))), "RelistStart", "RelistItem a@3", "RelistItem b@7")
	// Later pages carry the continue token only; the token holds the snapshot.
	h.expectList("", 500, "c1")
	h.expectEvents(h.listOK(page("10", "c2", obj("c", "9"))), "RelistItem c@9")
	h.expectList("", 500, "c2")
	h.expectEvents(h.listOK(page("10", "", obj("d", "2"))), "RelistItem d@2", "RelistDone @10")
	if got := h.m.lastRV; got != "10" {
		t.Fatalf("last RV after list = %q, want 10", got)
	}

	h.expectWatch("10")
	h.openOK()
	h.expectEvents(h.recv(apiwatch.Added, obj("e", "11")), "Added e@11")
	h.expectEvents(h.recv(apiwatch.Modified, obj("a", "12")), "Modified a@12")
	h.expectEvents(h.recv(apiwatch.Deleted, obj("b", "13")), "Deleted b@13")
	h.expectEvents(h.recv(apiwatch.Bookmark, bookmark("15", false)), "Bookmark @15")
	if got := h.m.lastRV; got != "15" {
		t.Fatalf("last RV after bookmark = %q, want 15", got)
	}
	h.expectAct(actReceive)
}

func TestMachine_WatchBookmarkWithoutResourceVersion_IsIgnored(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.expectEvents(h.recv(apiwatch.Bookmark, bookmark("", false)))
	if h.m.lastRV != "10" {
		t.Fatalf("last RV = %q, want 10 kept", h.m.lastRV)
	}
}

func TestMachine_WatchTimeout_IsRandomBetweenMinAndTwiceMin(t *testing.T) {
	for _, tc := range []struct {
		rand float64
		want int64
	}{{0, 300}, {0.5, 450}, {0.999, 599}} {
		h := newHarness(t, Options{InitialList: InitialListPaginated})
		h.listOK(page("10", ""))
		h.rand = []float64{tc.rand}
		h.m.plan()
		h.expectWatch("10")
		if got := *h.m.act.opts.TimeoutSeconds; got != tc.want {
			t.Errorf("rand %v: timeoutSeconds = %d, want %d", tc.rand, got, tc.want)
		}
	}
}

func TestMachine_WatchTimeout_HasAFloorOfFiveMinutes(t *testing.T) {
	for _, tc := range []struct {
		min  time.Duration
		want int64 // with rand 0.5
	}{{time.Second, 450}, {4 * time.Minute, 450}, {5 * time.Minute, 450}, {10 * time.Minute, 900}} {
		h := newHarness(t, Options{InitialList: InitialListPaginated, MinWatchTimeout: tc.min})
		h.listOK(page("10", ""))
		h.rand = []float64{0.5}
		h.m.plan()
		h.expectWatch("10")
		if got := *h.m.act.opts.TimeoutSeconds; got != tc.want {
			t.Errorf("MinWatchTimeout %v: timeoutSeconds = %d, want %d", tc.min, got, tc.want)
		}
	}
}

func TestMachine_ListExpiredOnFirstPage_ListsTheLatestStateConsistently(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.expectList("0", 500, "")
	evs, err := h.list(ListPage[cm]{}, errGone)
	if err != nil || len(evs) != 0 {
		t.Fatalf("410 on list: events %q, error %v; want none (it is recovered at once)", render(evs), err)
	}
	h.expectList("", 500, "")
	h.expectEvents(h.listOK(page("20", "", obj("a", "19"))), "RelistStart", "RelistItem a@19", "RelistDone @20")
	h.expectWatch("20")
}

// The three forms in which API servers have said "too large resource
// version", newest first.
var tooLargeForms = []struct {
	name string
	err  error
}{
	{"status cause (1.18.6 and later)", errTooLarge},
	{"cause message (1.17.0 to 1.18.5)", func() error {
		e := apierrors.NewTimeoutError("too large resource version", 1)
		e.ErrStatus.Details.Causes = []metav1.StatusCause{{Message: "Too large resource version"}}
		return e
	}()},
	{"message only (before 1.17.0)", apierrors.NewTimeoutError("Too large resource version: 15, current: 10", 1)},
}

func TestMachine_TooLargeResourceVersionInEveryForm_ListsFromTheLatestState(t *testing.T) {
	for _, tc := range tooLargeForms {
		t.Run(tc.name, func(t *testing.T) {
			if !isTooLargeRV(fmt.Errorf("wrapped: %w", tc.err)) {
				t.Fatalf("isTooLargeRV(%v) = false", tc.err)
			}
			// On a LIST at a resourceVersion: at once, a list from "".
			h := newHarness(t, Options{InitialList: InitialListPaginated})
			h.syncByList("10")
			h.recvErr(errGone)
			h.expectWait(0, time.Minute)
			h.expectList("10", 0, "")
			if evs, err := h.list(ListPage[cm]{}, tc.err); err != nil || len(evs) != 0 {
				t.Fatalf("list: events %q, error %v; want a silent list from the latest state", render(evs), err)
			}
			h.expectList("", 500, "")

			// On opening a watch, or as a watch event: a relist, which
			// then goes to "" if the server still lacks the version.
			h = newHarness(t, Options{InitialList: InitialListPaginated})
			h.listOK(page("10", ""))
			if err := h.open(tc.err); err != nil {
				t.Fatalf("watch open: unexpected error %v", err)
			}
			h.expectWait(0, time.Minute)
			h.expectList("10", 0, "")
			h.syncByList("12")
			if err := h.recvErr(tc.err); err != nil {
				t.Fatalf("watch event: unexpected error %v", err)
			}
			h.expectWait(0, time.Minute)
			h.expectList("12", 0, "")

			// On a streaming list at a resourceVersion: stream from "".
			h = newHarness(t, Options{})
			h.openOK()
			h.recv(apiwatch.Bookmark, bookmark("20", true))
			h.expectWatch("20")
			h.openOK()
			h.recvErr(errGone)
			h.expectWait(0, time.Minute)
			h.expectStream("20")
			if err := h.open(tc.err); err != nil {
				t.Fatalf("streaming list: unexpected error %v", err)
			}
			h.expectStream("")
		})
	}
	if isTooLargeRV(apierrors.NewTimeoutError("request did not complete within 60s", 1)) {
		t.Fatalf("a plain timeout is not a too-large resourceVersion")
	}
}

func TestMachine_ListTooLargeResourceVersion_ListsTheLatestState(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.recvErr(errGone)
	h.expectWait(0, time.Minute)
	h.expectList("10", 0, "")
	if _, err := h.list(ListPage[cm]{}, errTooLarge); err != nil {
		t.Fatalf("too-large RV: unexpected error %v", err)
	}
	h.expectList("", 500, "")
}

func TestMachine_ContinueTokenExpiredMidList_RestartsTheListInOneRequest(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.expectList("0", 500, "")
	h.expectEvents(h.listOK(page("10", "c1", obj("a", "3"))), "RelistStart", "RelistItem a@3")
	h.expectList("", 500, "c1")
	if evs, err := h.list(ListPage[cm]{}, errGone); err != nil || len(evs) != 0 {
		t.Fatalf("expired continue token: events %q, error %v; want a silent restart", render(evs), err)
	}
	// The restart asks for the whole list at the original resourceVersion,
	// and begins a snapshot of its own: page 1 of the abandoned listing is
	// not part of it.
	h.expectList("0", 0, "")
	h.expectEvents(h.listOK(page("30", "", obj("a", "25"), obj("b", "28"))),
		"RelistStart", "RelistItem a@25", "RelistItem b@28", "RelistDone @30")
}

func TestMachine_ListErrorMidPagination_RetriesThatPageAfterBackoff(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.listOK(page("10", "c1", obj("a", "3")))
	h.expectList("", 500, "c1")
	_, err := h.list(ListPage[cm]{}, errInternal)
	var oe *opError
	if !errors.As(err, &oe) || oe.Op != opList || !apierrors.IsInternalError(err) {
		t.Fatalf("error = %v, want an *opError for list wrapping the internal error", err)
	}
	if !errors.Is(h.m.lastErr, err) {
		t.Fatalf("last error = %v, want %v", h.m.lastErr, err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectList("", 500, "c1")
	// The retried page continues the snapshot begun before the error.
	h.expectEvents(h.listOK(page("10", "", obj("b", "4"))), "RelistItem b@4", "RelistDone @10")
	if h.m.lastErr != nil {
		t.Fatalf("last error after a completed snapshot = %v, want nil", h.m.lastErr)
	}
}

func TestMachine_ListForbidden_SurfacesAnErrorThatUnwrapsToTheAPIError(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	_, err := h.list(ListPage[cm]{}, errForbid)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("apierrors.IsForbidden(%v) = false", err)
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.Status().Code != 403 {
		t.Fatalf("errors.As StatusError failed on %v", err)
	}
	if !strings.Contains(err.Error(), "list configmaps:") || !strings.Contains(err.Error(), "cannot list") {
		t.Fatalf("message %q should name the call, the resource and the server's reason", err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectList("0", 500, "")
}

func TestMachine_ListWithoutResourceVersion_FailsAndListsAgain(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.listOK(page("", "c1", obj("a", "3")))
	evs, err := h.list(page("", ""), nil)
	if len(evs) != 0 || !errors.Is(err, ErrNoResourceVersion) {
		t.Fatalf("events %q, error %v; want no events and ErrNoResourceVersion", render(evs), err)
	}
	h.expectWait(time.Millisecond, time.Minute)
	h.expectList("0", 500, "")
}

func TestMachine_PagedListAtZero_KeepsPagingRelistsAtAResourceVersion(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.listOK(page("10", "c1"))
	h.listOK(page("10", ""))
	h.expectWatch("10")
	h.openOK()
	h.recvErr(errGone)
	h.expectWait(0, time.Minute)
	// The server paged a list at "0", so its watch cache is off: page relists too.
	h.expectList("10", 500, "")
}

func TestMachine_PageSizeConfig(t *testing.T) {
	for _, tc := range []struct {
		size             int64
		first, atVersion int64
	}{{0, 500, 0}, {50, 50, 50}, {-1, 0, 0}} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			h := newHarness(t, Options{InitialList: InitialListPaginated, PageSize: tc.size})
			h.expectList("0", tc.first, "")
			h.syncByList("10")
			h.recvErr(errGone)
			h.expectWait(0, time.Minute)
			h.expectList("10", tc.atVersion, "")
		})
	}
}

func TestMachine_StreamingList_EmitsItemsAsTheyArriveAndEndsAtInitialEventsEndThenWatchesFromIt(t *testing.T) {
	h := newHarness(t, Options{})
	h.expectStream("")
	h.openOK()
	if a := h.expectAct(actReceive); a.delay != initialEventsIdle {
		t.Fatalf("receive idle limit = %v, want %v during initial events", a.delay, initialEventsIdle)
	}
	h.expectEvents(h.recv(apiwatch.Added, obj("a", "3")), "RelistStart", "RelistItem a@3")
	h.expectEvents(h.recv(apiwatch.Added, obj("b", "5")), "RelistItem b@5")
	// A bookmark without the annotation is progress only.
	h.expectEvents(h.recv(apiwatch.Bookmark, bookmark("8", false)))
	h.expectEvents(h.recv(apiwatch.Bookmark, bookmark("9", true)), "RelistDone @9")
	// The streaming list's stream (compressed by servers that compress it)
	// is replaced by a plain watch from the end bookmark: no idle limit,
	// only the watch's own timeout (450s at rand 0.5) and its grace.
	h.expectWatch("9")
	h.openOK()
	if a := h.expectAct(actReceive); a.delay != 450*time.Second+watchTimeoutGrace {
		t.Fatalf("receive after the snapshot has a limit of %v, want the watch timeout 450s plus %v", a.delay, watchTimeoutGrace)
	}
	h.expectEvents(h.recv(apiwatch.Modified, obj("a", "10")), "Modified a@10")
	h.expectEvents(h.recv(apiwatch.Bookmark, bookmark("12", true)), "Bookmark @12")
	h.close()
	h.expectWatch("12")
}

func TestMachine_StreamingList_EndBookmarkWithoutResourceVersionFallsBack(t *testing.T) {
	h := newHarness(t, Options{})
	h.expectStream("")
	h.openOK()
	h.recv(apiwatch.Added, obj("a", "3"))
	h.expectEvents(h.recv(apiwatch.Bookmark, bookmark("", true)))
	h.expectList("0", 500, "")
}

func TestMachine_StreamingRejected_FallsBackToPaginatedListForGood(t *testing.T) {
	h := newHarness(t, Options{})
	h.expectStream("")
	if err := h.open(errInvalid); err != nil {
		t.Fatalf("a rejected streaming list in auto mode is not an error; got %v", err)
	}
	h.expectList("0", 500, "")
	h.syncByList("10", obj("a", "3"))
	h.recvErr(errGone)
	h.expectWait(0, time.Minute)
	h.expectList("10", 0, "") // not a streaming list again
}

func TestMachine_StreamingClosedBeforeEnd_FallsBackForThisSyncOnly(t *testing.T) {
	h := newHarness(t, Options{})
	h.expectStream("")
	h.openOK()
	h.expectEvents(h.recv(apiwatch.Added, obj("a", "3")), "RelistStart", "RelistItem a@3")
	if err := h.close(); err != nil {
		t.Fatalf("auto mode falls back silently; got %v", err)
	}
	h.expectList("0", 500, "")
	evs := h.listOK(page("10", "", obj("a", "3")))
	h.expectEvents(evs, "RelistStart", "RelistItem a@3", "RelistDone @10") // a snapshot of its own; the abandoned one has no RelistDone
	h.expectWatch("10")
	h.openOK()
	h.recvErr(errGone)
	h.expectWait(0, time.Minute)
	h.expectStream("10") // streaming is tried again at the next sync
}

func TestMachine_StreamingChangeBeforeEnd_FallsBack(t *testing.T) {
	for _, typ := range []apiwatch.EventType{apiwatch.Modified, apiwatch.Deleted} {
		h := newHarness(t, Options{})
		h.openOK()
		h.recv(apiwatch.Added, obj("a", "3"))
		evs, err := h.m.received(h.now, apiwatch.Event{Type: typ, Object: obj("a", "4")})
		if len(evs) != 0 || err != nil {
			t.Fatalf("%s before end: events %q error %v, want a silent fallback", typ, render(evs), err)
		}
		h.expectList("0", 500, "")
	}
}

func TestMachine_StreamingSilentBeforeEnd_FallsBackAfterTheIdleLimit(t *testing.T) {
	h := newHarness(t, Options{})
	h.openOK()
	h.recv(apiwatch.Added, obj("a", "3"))
	h.advance(initialEventsIdle)
	if err := h.m.timerFired(h.now); err != nil {
		t.Fatalf("idle fallback in auto mode: unexpected error %v", err)
	}
	h.expectList("0", 500, "")
}

func TestMachine_StreamingTransientError_RetriesStreamingAfterBackoff(t *testing.T) {
	h := newHarness(t, Options{})
	err := h.open(apierrors.NewTooManyRequests("slow down", 1))
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("error = %v, want the 429 surfaced", err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectStream("")
}

func TestMachine_StreamingOtherError_FallsBackForThisSync(t *testing.T) {
	h := newHarness(t, Options{})
	if err := h.open(errForbid); err != nil {
		t.Fatalf("auto mode falls back without reporting; got %v", err)
	}
	h.expectList("0", 500, "")
	// The list reports the 403 itself.
	if _, err := h.list(ListPage[cm]{}, errForbid); !apierrors.IsForbidden(err) {
		t.Fatalf("list error = %v, want forbidden", err)
	}
	if h.m.streamOff {
		t.Fatalf("a 403 must not switch streaming off for good")
	}
}

func TestMachine_ForcedStreaming_BacksOffAndRetriesInsteadOfFallingBack(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListStreaming})
	h.expectStream("")
	err := h.open(errInvalid)
	var oe *opError
	if !errors.As(err, &oe) || oe.Op != opWatchList || !apierrors.IsInvalid(err) {
		t.Fatalf("error = %v, want *opError{watch-list} wrapping 422", err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectStream("")
	h.openOK()
	h.recv(apiwatch.Added, obj("a", "3"))
	if err := h.close(); !errors.Is(err, ErrInitialEventsEndMissing) {
		t.Fatalf("closed before end: error %v, want ErrInitialEventsEndMissing", err)
	}
	h.expectWait(1600*time.Millisecond, 3200*time.Millisecond)
	h.expectStream("")
}

func TestMachine_StreamingExpiredResourceVersion_StreamsTheLatestStateAtOnce(t *testing.T) {
	h := newHarness(t, Options{})
	h.openOK()
	h.recv(apiwatch.Bookmark, bookmark("20", true))
	h.expectWatch("20")
	h.openOK()
	h.recvErr(errGone)
	h.expectWait(0, time.Minute)
	h.expectStream("20")
	if err := h.open(errGone); err != nil {
		t.Fatalf("unexpected error %v", err)
	}
	h.expectStream("") // no wait
	h.openOK()
	h.expectEvents(h.recv(apiwatch.Added, obj("a", "30")), "RelistStart", "RelistItem a@30")
	h.expectEvents(h.recv(apiwatch.Bookmark, bookmark("31", true)), "RelistDone @31")
	if h.m.rvGone {
		t.Fatalf("a completed snapshot must clear the unavailable-RV flag")
	}
}

func TestMachine_StreamingExpiredMidStream_StreamsTheLatestState(t *testing.T) {
	h := newHarness(t, Options{})
	h.openOK()
	h.recv(apiwatch.Bookmark, bookmark("20", true))
	h.expectWatch("20")
	h.openOK()
	h.recvErr(errGone)
	h.expectWait(0, time.Minute)
	h.openOK()
	h.recv(apiwatch.Added, obj("a", "21"))
	if err := h.recvErr(errGone410); err != nil {
		t.Fatalf("unexpected error %v", err)
	}
	h.expectStream("")
}

func TestMachine_WatchExpiredMidStream_RelistsAfterBackoffAtTheLastRV(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10", obj("a", "3"))
	h.expectEvents(h.recv(apiwatch.Added, obj("b", "11")), "Added b@11")
	if err := h.recvErr(errGone); err != nil {
		t.Fatalf("410 on a watch is recovered by a relist, not reported; got %v", err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	// Relist no older than what the consumer has, in one request (watch cache).
	h.expectList("11", 0, "")
	h.expectEvents(h.listOK(page("15", "", obj("b", "11"))), "RelistStart", "RelistItem b@11", "RelistDone @15")
	h.expectWatch("15")
}

func TestMachine_WatchOpenExpired_Relists(t *testing.T) {
	for _, err := range []error{errGone, errTooLarge} {
		h := newHarness(t, Options{InitialList: InitialListPaginated})
		h.listOK(page("10", ""))
		if got := h.open(err); got != nil {
			t.Fatalf("%v: unexpected error %v", err, got)
		}
		h.expectWait(0, time.Minute)
		h.expectList("10", 0, "")
	}
}

func TestMachine_WatchTooLargeResourceVersionEvent_Relists(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.recvErr(errTooLarge)
	h.expectWait(0, time.Minute)
	h.expectList("10", 0, "")
}

func TestMachine_WatchClosed_RewatchesFromTheLastRVWithoutRelist(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.recv(apiwatch.Added, obj("a", "11"))
	h.advance(5 * time.Minute)
	if err := h.close(); err != nil {
		t.Fatalf("a normal close is not an error; got %v", err)
	}
	h.expectWatch("11") // at once: no wait, no list
	h.openOK()
	h.advance(7 * time.Minute)
	h.close() // a quiet watch that lived its timeout is fine too
	h.expectWatch("11")
}

func TestMachine_WatchOpenPastItsTimeout_IsStoppedAndResumedFromTheLastRV(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10") // timeout 450s at rand 0.5
	h.advance(200 * time.Second)
	h.recv(apiwatch.Added, obj("a", "11"))
	// Events do not move the deadline: it counts from the watch's opening.
	if a := h.expectAct(actReceive); a.delay != 250*time.Second+watchTimeoutGrace {
		t.Fatalf("limit after an event at 200s = %v, want %v", a.delay, 250*time.Second+watchTimeoutGrace)
	}
	// A timer that fires early (a stale one) changes nothing.
	h.advance(100 * time.Second)
	if err := h.m.timerFired(h.now); err != nil {
		t.Fatalf("timer before the deadline: %v", err)
	}
	h.expectAct(actReceive)
	h.advance(150*time.Second + watchTimeoutGrace)
	err := h.m.timerFired(h.now)
	var oe *opError
	if !errors.Is(err, ErrWatchOverdue) || !errors.As(err, &oe) || oe.Op != opWatch {
		t.Fatalf("error = %v, want *opError{watch} wrapping ErrWatchOverdue", err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectWatch("11")
}

func TestMachine_WatchClosedAtOnceWithoutEvents_BacksOff(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.advance(100 * time.Millisecond)
	if err := h.close(); !errors.Is(err, ErrWatchClosedEarly) {
		t.Fatalf("error = %v, want ErrWatchClosedEarly", err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectWatch("10")
}

func TestMachine_WatchErrorEventFromTheServer_ReportsAndRelistsAfterBackoff(t *testing.T) {
	// A server-side error event that is neither about the resourceVersion
	// nor a request to slow down: the cache may hold something the server
	// can no longer serve, so a snapshot must replace it.
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"internal error", errInternal},
		{"store read error (unsafe deletion of a corrupt object)", errStoreRead},
		{"forbidden mid-watch", errForbid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{InitialList: InitialListPaginated})
			h.syncByList("10", obj("a", "3"), obj("bad", "5"))
			h.recv(apiwatch.Added, obj("b", "11"))
			err := h.recvErr(tc.err)
			var oe *opError
			if !errors.As(err, &oe) || oe.Op != opWatch || apierrors.ReasonForError(err) != apierrors.ReasonForError(tc.err) {
				t.Fatalf("error = %v, want *opError{watch} wrapping %v", err, tc.err)
			}
			h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
			if !errors.Is(h.m.lastErr, err) {
				t.Fatalf("last error while relisting = %v, want %v kept until the snapshot completes", h.m.lastErr, err)
			}
			h.expectList("11", 0, "")
			h.expectEvents(h.listOK(page("15", "", obj("a", "3"), obj("b", "11"))),
				"RelistStart", "RelistItem a@3", "RelistItem b@11", "RelistDone @15")
			if h.m.lastErr != nil {
				t.Fatalf("last error after the snapshot = %v, want nil", h.m.lastErr)
			}
			h.expectWatch("15")
		})
	}
}

func TestMachine_WatchErrorEventTooManyRequests_RewatchesAfterRetryAfterWithoutRelist(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.recv(apiwatch.Added, obj("a", "11"))
	err := h.recvErr(apierrors.NewTooManyRequests("slow down", 7))
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("error = %v, want the 429 reported", err)
	}
	// The server asked for 7s, more than the first backoff step.
	h.expectWait(7*time.Second, 7*time.Second)
	h.expectWatch("11")
	h.openOK()
	// Retry-After never stretches a wait past Backoff.Max.
	h.recvErr(apierrors.NewTooManyRequests("slow down", 3600))
	h.expectWait(30*time.Second, 30*time.Second)
	h.expectWatch("11")
}

func TestMachine_WatchStreamBrokenClientSide_RewatchesFromTheLastRVWithoutRelist(t *testing.T) {
	// What client-go's stream watcher sends when the connection is lost
	// (for example an HTTP/2 health ping went unanswered).
	reporter := apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding")
	st := reporter.AsObject(errors.New("unable to decode an event from the watch stream: http2: client connection lost")).(*metav1.Status)
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.recv(apiwatch.Added, obj("a", "11"))
	h.expectAct(actReceive)
	evs, err := h.m.received(h.now, apiwatch.Event{Type: apiwatch.Error, Object: st})
	if len(evs) != 0 || !apierrors.IsInternalError(err) {
		t.Fatalf("events %q, error %v; want none and the client's 500 reported", render(evs), err)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectWatch("11")
}

func TestMachine_WatchOpenForbidden_SurfacesTheErrorUntilAWatchOpens(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.listOK(page("10", ""))
	err := h.open(errForbid)
	if !apierrors.IsForbidden(err) || !apierrors.IsForbidden(h.m.lastErr) {
		t.Fatalf("error %v, last error %v; want forbidden", err, h.m.lastErr)
	}
	h.expectWait(800*time.Millisecond, 1600*time.Millisecond)
	h.expectWatch("10") // retried as a watch, not a relist
	h.openOK()
	if h.m.lastErr != nil {
		t.Fatalf("last error after the watch opened = %v, want nil", h.m.lastErr)
	}
}

func TestMachine_UnexpectedObject_IsSkippedAndReported(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	h.syncByList("10")
	h.expectAct(actReceive)
	evs, err := h.m.received(h.now, apiwatch.Event{Type: apiwatch.Added, Object: &corev1.Secret{}})
	if len(evs) != 0 || !errors.Is(err, ErrUnexpectedObject) {
		t.Fatalf("events %q, error %v; want none and ErrUnexpectedObject", render(evs), err)
	}
	h.expectEvents(h.recv(apiwatch.Added, obj("a", "11")), "Added a@11") // the watch goes on
}

func TestMachine_Backoff_DoublesFromInitialCapsAtMaxWithJitterAndResetsAfterQuiet(t *testing.T) {
	h := newHarness(t, Options{InitialList: InitialListPaginated})
	fail := func(r float64) time.Duration {
		t.Helper()
		h.rand = []float64{r}
		if _, err := h.list(ListPage[cm]{}, errInternal); err == nil {
			t.Fatalf("expected an error")
		}
		a := h.expectAct(actWait)
		h.advance(a.delay)
		h.m.timerFired(h.now)
		return a.delay
	}
	// No jitter drawn (r=0): the base sequence.
	var got []time.Duration
	for range 9 {
		got = append(got, fail(0))
	}
	want := []time.Duration{800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond,
		12800 * time.Millisecond, 25600 * time.Millisecond, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	// Jitter adds up to 100% of the base: at the cap, within [30s, 60s).
	if d := fail(0.999); d < 30*time.Second || d >= 60*time.Second {
		t.Fatalf("jittered capped delay %v, want within [30s, 60s)", d)
	}
	// Two quiet minutes reset the backoff.
	h.advance(2 * time.Minute)
	if d := fail(0); d != 800*time.Millisecond {
		t.Fatalf("delay after 2 quiet minutes = %v, want 800ms", d)
	}
	// Less than that does not.
	h.advance(time.Minute)
	if d := fail(0); d != 1600*time.Millisecond {
		t.Fatalf("delay after 1 quiet minute = %v, want 1.6s", d)
	}
}

func TestBackoff_JitterStaysWithinBounds(t *testing.T) {
	b := backoffState{cfg: Backoff{}.withDefaults()}
	now := time.Unix(0, 0)
	base := 800 * time.Millisecond
	for i := range 12 {
		r := float64(i%4) / 4
		d := b.next(now, r)
		if d < base || d >= 2*base {
			t.Fatalf("failure %d: delay %v outside [%v, %v)", i, d, base, 2*base)
		}
		base = min(2*base, 30*time.Second)
		now = now.Add(d)
	}
}

func TestBackoff_ConfigOverridesAndNoJitter(t *testing.T) {
	b := backoffState{cfg: Backoff{Initial: time.Second, Max: 3 * time.Second, Factor: 3, Jitter: -1, ResetAfter: time.Hour}.withDefaults()}
	now := time.Unix(0, 0)
	var got []time.Duration
	for range 3 {
		got = append(got, b.next(now, 0.99))
		now = now.Add(30 * time.Minute)
	}
	if want := []time.Duration{time.Second, 3 * time.Second, 3 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}

func TestMachine_Restart_BeginsASnapshotAtTheLastRV(t *testing.T) {
	h := newHarness(t, Options{})
	h.openOK()
	h.recv(apiwatch.Bookmark, bookmark("20", true))
	h.expectWatch("20")
	h.openOK()
	h.recv(apiwatch.Added, obj("a", "21"))
	h.m.restart()
	h.expectStream("21")
}
