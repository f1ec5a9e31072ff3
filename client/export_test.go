package client

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kloop-dev/kloop/watcher"
)

// The write tracker and a reader over any tracker are kloop's own
// bookkeeping; the tests reach them under these names.
type (
	WriteTracker = writeTracker
	PendingWrite = pendingWrite
)

var NewWriteTracker = newWriteTracker

func NewCachedReader[T watcher.Object](c readCache[T], tracker *writeTracker, gr schema.GroupResource, opts ReaderOptions) *CachedReader[T] {
	return newCachedReader(c, tracker, gr, opts)
}

// Tracker returns the client's record of its writes (nil with
// Options.DisableWriteTracking).
func (c *Client) Tracker() *writeTracker { return c.tracker }

// StaleError is the error a read that waited too long for its own write
// returns; the tests look at its fields.
type StaleError = staleError
