// Package childproc runs one side of a benchmark as a child process of the
// benchmark's own binary and speaks the line protocol the benchmarks share:
// the child writes lines "<WORD> <value>" to its stdout as it reaches each
// step, reads requests from its stdin, and exits when its stdin closes. The
// child's stderr is the parent's.
package childproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Child is a running child process.
type Child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// Start runs the benchmark's binary (os.Args[0]) with args.
func Start(args ...string) (*Child, error) { return StartProgram(os.Args[0], args...) }

// StartProgram runs the binary at path with args: another build of the
// benchmark, which speaks the same protocol.
func StartProgram(path string, args ...string) (*Child, error) {
	cmd := exec.Command(path, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Child{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}, nil
}

// Expect reads the child's next line, which must start with word, and
// returns the rest of it, trimmed.
func (c *Child) Expect(word string) (string, error) {
	if !c.lines.Scan() {
		return "", fmt.Errorf("child ended before %q: %v", word, c.lines.Err())
	}
	l := c.lines.Text()
	if !strings.HasPrefix(l, word) {
		return "", fmt.Errorf("child said %q, want %q", l, word)
	}
	return strings.TrimSpace(strings.TrimPrefix(l, word)), nil
}

// Send writes one request line to the child.
func (c *Child) Send(line string) error {
	_, err := io.WriteString(c.stdin, line+"\n")
	return err
}

// Close closes the child's stdin, on which it exits, and waits for it.
func (c *Child) Close() {
	c.stdin.Close()
	_ = c.cmd.Wait()
}
