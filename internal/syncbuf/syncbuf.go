// Package syncbuf has a text buffer that several goroutines may write to and
// read at once: what tests give loggers and commands as their output, and
// read while those still write.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is an io.Writer whose String may be called while writes go on. The
// zero value is empty and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
