package reexec

import (
	"bufio"
	"io"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// LineWait bounds each wait of Lines.WaitFor and Lines.WaitEOF.
const LineWait = 60 * time.Second

// Lines collects the lines of a stream, such as the stdout of a process
// started with Command, and lets a test wait for one without polling.
type Lines struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced on every new line, and at the end
	eof   bool
}

// ReadLines reads r line by line in a goroutine of its own, which ends when r
// does (for a process's pipe: when the process exits and cmd.Wait closes it).
func ReadLines(r io.Reader) *Lines {
	l := &Lines{more: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, s.Text())
			close(l.more)
			l.more = make(chan struct{})
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.eof = true
		close(l.more)
		l.mu.Unlock()
	}()
	return l
}

// All returns the lines read so far.
func (l *Lines) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// WaitFor waits up to LineWait for a line that matches re and returns the
// first such line; what names it in the failure message. It fails the test
// if the stream ends or the time runs out first.
func (l *Lines) WaitFor(t testing.TB, what string, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(LineWait)
	for {
		l.mu.Lock()
		for _, s := range l.lines {
			if re.MatchString(s) {
				l.mu.Unlock()
				return s
			}
		}
		more, eof := l.more, l.eof
		l.mu.Unlock()
		if eof {
			t.Fatalf("output ended before %s; lines:\n%s", what, strings.Join(l.All(), "\n"))
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no %s within %v; lines so far:\n%s", what, LineWait, strings.Join(l.All(), "\n"))
		}
	}
}

// WaitEOF waits up to LineWait for the stream to end.
func (l *Lines) WaitEOF(t testing.TB) {
	t.Helper()
	deadline := time.After(LineWait)
	for {
		l.mu.Lock()
		more, eof := l.more, l.eof
		l.mu.Unlock()
		if eof {
			return
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("output still open after %v; lines so far:\n%s", LineWait, strings.Join(l.All(), "\n"))
		}
	}
}

// Start starts cmd (from Command) with its stdout and stderr read as Lines.
// The process is killed and waited for when the test ends, if it has not
// exited by then, and its stderr is logged if the test failed; name labels
// that log.
func Start(t testing.TB, name string, cmd *exec.Cmd) (stdout, stderr *Lines) {
	t.Helper()
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout, stderr = ReadLines(outPipe), ReadLines(errPipe)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, strings.Join(stderr.All(), "\n"))
		}
	})
	return stdout, stderr
}

// WaitForAny waits up to LineWait for a line that matches re in any of
// streams, and returns the index of the first stream (in the order given)
// that has one, and that line. It fails the test if every stream ends or
// the time runs out first.
func WaitForAny(t testing.TB, what string, re *regexp.Regexp, streams ...*Lines) (int, string) {
	t.Helper()
	deadline := time.After(LineWait)
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)}}
		for i, l := range streams {
			l.mu.Lock()
			for _, s := range l.lines {
				if re.MatchString(s) {
					l.mu.Unlock()
					return i, s
				}
			}
			if !l.eof {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(l.more)})
			}
			l.mu.Unlock()
		}
		if len(cases) == 1 {
			t.Fatalf("every stream ended before %s", what)
		}
		if chosen, _, _ := reflect.Select(cases); chosen == 0 {
			t.Fatalf("no %s within %v", what, LineWait)
		}
	}
}
