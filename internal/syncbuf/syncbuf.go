// Package syncbuf has a text buffer that several goroutines may write to and
// read at once: what tests give loggers and commands as their output, and
// read while those still write.
package syncbuf

import (
	"strings"
	"sync"

	"github.com/kloop-dev/kloop/internal/await"
)

// Buffer is an io.Writer whose String may be called while writes go on. The
// zero value is empty and ready to use.
type Buffer struct {
	mu      sync.Mutex
	b       strings.Builder
	written await.Signal
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.b.Write(p)
	b.mu.Unlock()
	b.written.Notify()
	return n, err
}

// Changed returns a channel closed by the next Write, for await.Until:
//
//	await.Until(t, "the ready line", buf.Changed, func() bool { return strings.Contains(buf.String(), "ready") })
func (b *Buffer) Changed() <-chan struct{} { return b.written.Changed() }

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
