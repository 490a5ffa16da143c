package plugintest

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Pidfd opens a pidfd of a running process (closed when the test ends).
// The process need not be this one's child (a provider the plugin started,
// a plugin the host started), and the pidfd names it even once its pid is
// reused, so a test can signal it or wait for its exit without polling.
func Pidfd(t testing.TB, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// Exited waits up to d for the process of a pidfd to exit and reports
// whether it did: its pidfd becomes readable then, whether or not its
// parent has reaped it.
func Exited(t testing.TB, pidfd int, d time.Duration) bool {
	t.Helper()
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, int(d.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd: %v", err)
		}
		return n > 0
	}
}
