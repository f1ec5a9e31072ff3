package controller

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"

	"github.com/kloop-dev/kloop/cache"
	"github.com/kloop-dev/kloop/internal/ownwrite"
)

// loggerKey is the context key of the logger LoggerFrom returns.
type loggerKey struct{}

// withLogger returns a copy of ctx that carries log, for LoggerFrom. The
// controller does it for every Reconcile call; code that calls a reconciler
// itself (a test, a one-off run) can do it too.
func withLogger(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

// LoggerFrom returns the logger ctx carries. In a Reconcile call it is the
// controller's logger (Options.Logger) with the attributes controller, key
// (and namespace and name for a cache.Key) and reconcileID, an id unique
// to that call, so that every line a reconcile logs can be told apart from
// a concurrent one's. Without one it returns slog.Default().
func LoggerFrom(ctx context.Context) *slog.Logger {
	if log, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && log != nil {
		return log
	}
	if call, ok := ctx.Value(callKey{}).(reconcileCall); ok {
		return call.callLogger()
	}
	return slog.Default()
}

// reconcileLogger returns the logger of one Reconcile call: base with the
// call's key attributes (key; namespace and name for a cache.Key) and a reconcileID, a short id of 64
// random bits, which makes a collision among the calls anyone reads
// together unlikely.
func reconcileLogger[K comparable](base *slog.Logger, key K) *slog.Logger {
	return &newReconcileHandler(base, key, causeSet{}).logger
}

// newReconcileHandler returns the handler of one Reconcile call, with its
// logger (log) and its causes.
func newReconcileHandler[K comparable](base *slog.Logger, key K, causes causeSet) *reconcileHandler[K] {
	h := &reconcileHandler[K]{}
	h.init(base, key, &causes)
	return h
}

// init sets h up in place; its logger is h.logger, held by value so that a
// handler and its logger are one allocation.
func (h *reconcileHandler[K]) init(base *slog.Logger, key K, causes *causeSet) {
	*h = reconcileHandler[K]{base: base.Handler(), key: key, causes: *causes}
	h.logger = *slog.New(h)
}

// callContext is the context of one Reconcile call: its parent, with the
// call's handler (for LoggerFrom and CausesFrom) and the sink of its
// writes (ownwrite.Key) answered by Value. One allocation per call, where
// context.WithValue for each, the handler, its logger and the sink were
// five (docs/benchmarks.md, events).
type callContext[K comparable] struct {
	context.Context
	h reconcileHandler[K]
	// w remembers the call's writes as h.key's: the context is the
	// call's ownwrite.Sink.
	w *selfWrites[K]
}

// newCallContext returns the context of a Reconcile call of key under
// parent: its logger is base's, its writes are remembered in w as key's.
func newCallContext[K comparable](parent context.Context, base *slog.Logger, key K, causes *causeSet, w *selfWrites[K]) *callContext[K] {
	c := &callContext[K]{Context: parent, w: w}
	c.h.init(base, key, causes)
	return c
}

func (c *callContext[K]) Value(k any) any {
	switch k.(type) {
	case callKey:
		return reconcileCall(&c.h)
	case ownwrite.Key:
		return ownwrite.Sink(c)
	}
	return c.Context.Value(k)
}

// reconcileHandler adds a Reconcile call's attributes to what its logger
// logs. It formats them only for a record that is logged, where
// Logger.With would format them for every call: most reconciles log
// nothing at the levels enabled, and this was most of a reconcile's
// allocations (BENCHMARKS.md, events).
type reconcileHandler[K comparable] struct {
	base slog.Handler
	key  K
	// id is the call's reconcileID, drawn when a record first needs it
	// (see reconcileID): most calls log nothing. 0 until then.
	id     atomic.Uint64
	logger slog.Logger
	causes causeSet
}

// reconcileID returns the call's id, drawing it the first time; records
// logged at once from goroutines of the call agree on it.
func (h *reconcileHandler[K]) reconcileID() uint64 {
	if id := h.id.Load(); id != 0 {
		return id
	}
	id := rand.Uint64()
	for id == 0 {
		id = rand.Uint64()
	}
	if h.id.CompareAndSwap(0, id) {
		return id
	}
	return h.id.Load()
}

// Wrote implements ownwrite.Sink: the call's writes are remembered as its
// key's.
func (c *callContext[K]) Wrote(namespace, name, rv string) {
	c.w.add(c.h.key, namespace, name, rv)
}

func (h *reconcileHandler[K]) callLogger() *slog.Logger { return &h.logger }
func (h *reconcileHandler[K]) callCauses() *causeSet    { return &h.causes }

func (h *reconcileHandler[K]) attrs() []slog.Attr {
	id := slog.String("reconcileID", strconv.FormatUint(h.reconcileID(), 36))
	switch k := any(h.key).(type) {
	case cache.Key:
		return []slog.Attr{slog.String("key", k.String()), slog.String("namespace", k.Namespace), slog.String("name", k.Name), id}
	case fmt.Stringer:
		return []slog.Attr{slog.String("key", k.String()), id}
	default:
		return []slog.Attr{slog.Any("key", h.key), id}
	}
}

func (h *reconcileHandler[K]) Enabled(ctx context.Context, level slog.Level) bool {
	return h.base.Enabled(ctx, level)
}

// Handle puts the call's attributes before the record's own, where
// Logger.With would have put them, and, at Debug level and below, its
// causes after them.
func (h *reconcileHandler[K]) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.attrs()...)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	if r.Level <= slog.LevelDebug && h.causes.n > 0 {
		out.AddAttrs(slog.String("causes", h.causes.String()))
	}
	return h.base.Handle(ctx, out)
}

// WithAttrs and WithGroup fix the call's attributes in the base handler
// first, so that a group holds only what is added after it; the derived
// logger's Debug lines still carry the causes.
func (h *reconcileHandler[K]) WithAttrs(as []slog.Attr) slog.Handler {
	return withCauses(h.base.WithAttrs(h.attrs()).WithAttrs(as), &h.causes)
}

func (h *reconcileHandler[K]) WithGroup(name string) slog.Handler {
	return withCauses(h.base.WithAttrs(h.attrs()).WithGroup(name), &h.causes)
}

// causesHandler adds a reconcile's causes to the Debug records of a logger
// derived from the reconcile's (LoggerFrom(ctx).With(...)).
type causesHandler struct {
	slog.Handler
	causes *causeSet
}

func withCauses(h slog.Handler, causes *causeSet) slog.Handler {
	if causes.n == 0 {
		return h
	}
	return &causesHandler{Handler: h, causes: causes}
}

func (h *causesHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level <= slog.LevelDebug {
		r = r.Clone()
		r.AddAttrs(slog.String("causes", h.causes.String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *causesHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return withCauses(h.Handler.WithAttrs(as), h.causes)
}

func (h *causesHandler) WithGroup(name string) slog.Handler {
	return withCauses(h.Handler.WithGroup(name), h.causes)
}
