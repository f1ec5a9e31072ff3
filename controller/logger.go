package controller

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
)

// loggerKey is the context key of the logger LoggerFrom returns.
type loggerKey struct{}

// WithLogger returns a copy of ctx that carries log, for LoggerFrom. The
// controller does it for every Reconcile call; code that calls a reconciler
// itself (a test, a one-off run) can do it too.
func WithLogger(ctx context.Context, log *slog.Logger) context.Context {
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
	return slog.Default()
}

// newReconcileID returns a short id for one Reconcile call. 64 random bits
// make a collision among the calls anyone reads together unlikely.
func newReconcileID() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}
