package reexec

import (
	"io"
	"regexp"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWaitForAny_ReturnsTheStreamThatHasTheLine(t *testing.T) {
	r0, w0 := io.Pipe()
	r1, w1 := io.Pipe()
	a, b := ReadLines(r0), ReadLines(r1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.WriteString(w0, "starting\n")
		_, _ = io.WriteString(w1, "starting\nBecame the leader\n")
		_, _ = io.WriteString(w0, "Became the leader too late\n")
		w0.Close()
		w1.Close()
	}()
	i, line := WaitForAny(t, "the leader line", regexp.MustCompile(`^Became the leader$`), a, b)
	if i != 1 || line != "Became the leader" {
		t.Errorf("WaitForAny = %d, %q; want 1 and the line", i, line)
	}
	<-done
	a.WaitEOF(t)
	b.WaitEOF(t)
}
