package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one child: etcd, kube-apiserver or kube-controller-manager.
type process struct {
	name    string
	bin     string
	args    []string
	logPath string

	cmd    *exec.Cmd
	logF   *os.File
	exited chan struct{} // closed when the process has exited and been reaped
	err    error         // its exit status, valid after exited is closed
}

func (p *process) start() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("testenv: open %s log: %w", p.name, err)
	}
	fmt.Fprintf(f, "==== %s starting %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// A group of its own, so the whole tree is signalled together and an
		// interrupt typed at the terminal does not reach it before we do.
		Setpgid: true,
		// If the process that started it dies (test binary killed, timed out,
		// panicked), the kernel kills the child too.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("testenv: start %s (%s): %w", p.name, p.bin, err)
	}
	p.cmd, p.logF = cmd, f
	p.exited = make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return nil
}

// running reports whether the process was started and has not exited.
func (p *process) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, and SIGKILL if it has not exited
// within grace. It returns once the process has been reaped.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	if p.running() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
	} else {
		<-p.exited
	}
	// Anything left in the group (there should be nothing) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func (p *process) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// errPortTaken is what an early exit wraps when the process could not bind
// its port: a port picked as free was taken by another process before
// this one bound it.
var errPortTaken = errors.New("a port picked as free was taken before the process bound it")

// exitError describes an early exit with the last lines of the log.
func (p *process) exitError() error {
	last := tail(p.logPath, 20)
	err := fmt.Errorf("testenv: %s exited early (%v); last log lines of %s:\n%s", p.name, p.err, p.logPath, last)
	if strings.Contains(last, "address already in use") {
		return fmt.Errorf("%w (%w)", err, errPortTaken)
	}
	return err
}

// tail returns up to n last lines of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
