package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// childProcess is the command kloop dev runs on its control plane.
type childProcess struct {
	cmd  *exec.Cmd
	done chan int // its exit code, once it has exited
}

// startChild starts args with KUBECONFIG set to kubeconfig. It runs
// in a process group of its own, so that an interrupt typed at the
// terminal reaches kloop dev alone, which then interrupts the whole group
// once (a command such as go run passes a signal on to its child only
// through the group); it dies with kloop dev.
func startChild(args []string, kubeconfig string, stdout, stderr io.Writer) (*childProcess, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	c := &childProcess{cmd: cmd, done: make(chan int, 1)}
	go func() {
		err := cmd.Wait()
		code := 0
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
			if code < 0 { // killed by a signal
				code = 1
			}
		case err != nil:
			code = 1
		}
		c.done <- code
	}()
	return c, nil
}

// interrupt sends SIGINT to the command's process group.
func (c *childProcess) interrupt() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGINT)
}
