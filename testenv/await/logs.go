package await

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kloop-dev/kloop/internal/ctxwait"
)

// Logs is an slog.Handler that keeps every record it is given, at every
// level, so that a test can wait for a line (Logged) or for a controller to
// have reconciled a key (Reconciled) instead of sleeping. Give it to the
// code under test as its logger:
//
//	logs := await.NewLogs()
//	opts := kloop.Options{Logger: slog.New(logs)}
//
// It keeps records for the life of the test; it is not for long runs.
type Logs struct {
	s      *logStore
	attrs  []slog.Attr
	groups []string
}

type logStore struct {
	mu      sync.Mutex
	records []Record
	changed Signal
}

// Record is one log record as Logs keeps it: the attributes flattened to
// text, under their group names joined with dots ("group.key").
type Record struct {
	Time    time.Time
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// String formats r as one line, as slog's text handler would.
func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "level=%s msg=%q", r.Level, r.Message)
	for _, k := range slices.Sorted(maps.Keys(r.Attrs)) {
		fmt.Fprintf(&b, " %s=%q", k, r.Attrs[k])
	}
	return b.String()
}

// NewLogs returns an empty Logs.
func NewLogs() *Logs { return &Logs{s: &logStore{}} }

// Enabled reports true at every level: a test sees Debug records too.
func (l *Logs) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r.
func (l *Logs) Handle(_ context.Context, r slog.Record) error {
	rec := Record{Time: r.Time, Level: r.Level, Message: r.Message, Attrs: map[string]string{}}
	for _, a := range l.attrs {
		flatten(rec.Attrs, "", a)
	}
	prefix := ""
	if len(l.groups) > 0 {
		prefix = strings.Join(l.groups, ".") + "."
	}
	r.Attrs(func(a slog.Attr) bool {
		flatten(rec.Attrs, prefix, a)
		return true
	})
	l.s.mu.Lock()
	l.s.records = append(l.s.records, rec)
	l.s.mu.Unlock()
	l.s.changed.Notify()
	return nil
}

// flatten writes a, resolved, into m under prefix; a group's members get
// the group's name as a further prefix.
func flatten(m map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			flatten(m, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	m[prefix+a.Key] = v.String()
}

// WithAttrs returns a handler that adds as to every record; it shares
// l's records.
func (l *Logs) WithAttrs(as []slog.Attr) slog.Handler {
	prefix := ""
	if len(l.groups) > 0 {
		prefix = strings.Join(l.groups, ".")
	}
	n := &Logs{s: l.s, attrs: slices.Clone(l.attrs), groups: l.groups}
	for _, a := range as {
		if prefix != "" {
			a = slog.Group(prefix, a)
		}
		n.attrs = append(n.attrs, a)
	}
	return n
}

// WithGroup returns a handler that puts the record's attributes under
// name; it shares l's records.
func (l *Logs) WithGroup(name string) slog.Handler {
	if name == "" {
		return l
	}
	return &Logs{s: l.s, attrs: l.attrs, groups: append(slices.Clone(l.groups), name)}
}

// Records returns every record kept so far, oldest first.
func (l *Logs) Records() []Record {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return slices.Clone(l.s.records)
}

// changed returns a channel closed by the next record, for Until.
func (l *Logs) changed() <-chan struct{} { return l.s.changed.Changed() }

// String returns the records, a line each, for a failure message.
func (l *Logs) String() string {
	var b strings.Builder
	for _, r := range l.Records() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// logTail is how many of the latest records a failed wait quotes.
const logTail = 20

// Logged waits until logs has a record that match accepts, and returns the
// first one. It fails t, naming what and quoting the latest records, if
// none comes within Timeout.
func Logged(t TB, what string, logs *Logs, match func(Record) bool) Record {
	t.Helper()
	return loggedFrom(t, what, logs, 0, match)
}

// loggedFrom is Logged over the records after the first from.
func loggedFrom(t TB, what string, logs *Logs, from int, match func(Record) bool) Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	var found Record
	err := ctxwait.Until(ctx, logs.changed, func() bool {
		recs := logs.Records()
		for _, r := range recs[min(from, len(recs)):] {
			if match(r) {
				found = r
				return true
			}
		}
		return false
	})
	if err != nil {
		recs := logs.Records()
		var tail strings.Builder
		for _, r := range recs[max(0, len(recs)-logTail):] {
			tail.WriteString("\n\t" + r.String())
		}
		t.Fatalf("waiting for %s: %v; the latest of %d log records:%s", what, err, len(recs), tail.String())
	}
	return found
}

// ReconciledMessage is the message a kloop controller logs at Debug level
// after each reconcile that returned no error, with the attributes
// "controller" (its name) and "key" (the key as text; "namespace/name" for
// a cache.Key).
const ReconciledMessage = "Reconciled"

// Reconciled waits until the controller called controller has reconciled
// key without an error, as its log in logs says (ReconciledMessage), and
// returns that record. The controller must log to logs (Options.Logger).
//
// Any reconcile since logs was made counts, the first one is returned: so
// a test that creates an object and then waits passes even when the
// reconcile came first, and a second wait for the same key passes at once.
// To wait for a reconcile that a later change causes, use NextReconcile.
func Reconciled(t TB, logs *Logs, controller, key string) Record {
	t.Helper()
	return loggedFrom(t, reconcileOf(controller, key), logs, 0, isReconcile(controller, key))
}

// NextReconcile is Reconciled for a reconcile still to come: it notes the
// records logs holds now, and returns a wait that returns the first later
// record of the controller called controller having reconciled key
// without an error. Call it before the change that is to cause the
// reconcile, and the wait after it, so that a reconcile quicker than the
// test still counts:
//
//	next := await.NextReconcile(t, logs, "foo-controller", "demo/example")
//	// ... update the Foo ...
//	next()
//
// Each call of the wait returns the same record (the first after the
// note); take a new NextReconcile for each change.
func NextReconcile(t TB, logs *Logs, controller, key string) (wait func() Record) {
	t.Helper()
	from := len(logs.Records())
	return func() Record {
		t.Helper()
		return loggedFrom(t, "the next "+reconcileOf(controller, key)+fmt.Sprintf(" (after log record %d)", from), logs, from, isReconcile(controller, key))
	}
}

func reconcileOf(controller, key string) string {
	return fmt.Sprintf("controller %s to reconcile %s", controller, key)
}

func isReconcile(controller, key string) func(Record) bool {
	return func(r Record) bool {
		return r.Message == ReconciledMessage && r.Attrs["controller"] == controller && r.Attrs["key"] == key
	}
}
