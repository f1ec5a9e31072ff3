package await

import (
	"strings"
	"sync"
)

// Buffer is an io.Writer that several goroutines may write to while others
// read it: what a test gives a logger or a command as its output. The zero
// value is empty and ready to use. Wait on it with Until, or with Output.
type Buffer struct {
	mu      sync.Mutex
	b       strings.Builder
	written Signal
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
