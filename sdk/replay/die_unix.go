//go:build unix

package replay

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baton-run/baton/sdk/clock"
)

var signals = map[string]syscall.Signal{
	"SIGKILL": syscall.SIGKILL,
	"SIGTERM": syscall.SIGTERM,
	"SIGINT":  syscall.SIGINT,
	"SIGHUP":  syscall.SIGHUP,
}

// die ends the process by the signal named (one of transcript.Signals), as
// a provider killed by it ends, whatever disposition of the signal the
// process inherited. With the program's own handling of it reset, the Go
// runtime dies of SIGTERM as the default action does; but a SIGHUP or
// SIGINT the process started with ignored (under nohup, in a shell's
// background job) the runtime keeps ignored, and signal.Reset puts back
// the ignore (after main's NotifyContext), so die sets the default action
// itself (setDefault), after the reset and before it sends the signal.
// SIGKILL cannot be handled or ignored at all. The signal may reach
// another of the process's threads; die waits for it, and returns (the
// exit code a shell gives a process killed by the signal) only if it has
// not ended the process within a minute.
//
// No test counts die's statements, and none can: a process that dies by a
// signal writes no coverage counters (a binary built with -cover writes
// them when it exits), and die run in a test's own process would kill the
// test binary. The replay peer's tests see its work from outside instead
// (replaypeer's TestExitSimulation: the wait status names each signal,
// with the signals inherited as they are and ignored); the Error that asks
// for it is checked in-process (TestSignalExit).
func die(name string) int {
	sig := signals[name]
	signal.Reset(sig)
	if sig != syscall.SIGKILL {
		// Should it fail, the signal is sent all the same: it ends the
		// process unless it was inherited ignored.
		_ = setDefault(sig)
	}
	_ = syscall.Kill(os.Getpid(), sig)
	_ = clock.Sleep(context.Background(), nil, time.Minute)
	return 128 + int(sig)
}
