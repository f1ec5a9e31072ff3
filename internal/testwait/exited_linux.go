package testwait

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kloop-dev/kloop/testenv/await"
)

// Exited waits until the process pid has terminated, which need not be a
// child of this one: the kernel tells through a pidfd, nothing polls. A
// process already gone counts as terminated. Exited fails t, naming what,
// if pid still runs after await.Timeout.
func Exited(t await.TB, what string, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatalf("waiting for %s (pid %d): %v", what, pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(await.Timeout)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			t.Fatalf("waiting for %s (pid %d): %v", what, pid, err)
		case n == 0:
			t.Fatalf("waiting for %s: pid %d still running after %v", what, pid, await.Timeout)
		}
		return
	}
}
