package replay

import (
	"fmt"
	"syscall"
	"unsafe"
)

// setDefault gives sig its default action (SIG_DFL) through
// rt_sigaction(2), beneath the Go runtime: os/signal has no call that
// does, and keeps a SIGHUP or SIGINT the process inherited ignored. Only
// die calls it, just before the signal ends the process, so the runtime
// never sees a disposition it did not set.
func setDefault(sig syscall.Signal) error {
	// A kernel sigaction of zeros is SIG_DFL with no flags and an empty
	// mask on every architecture; 64 bytes hold the largest.
	var act [64]byte
	// The kernel's sigset_t is 8 bytes (64 signals), 16 on mips (128
	// signals); rt_sigaction refuses any other size with EINVAL.
	var errno syscall.Errno
	for _, size := range []uintptr{8, 16} {
		_, _, errno = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, size, 0, 0)
		if errno != syscall.EINVAL {
			break
		}
	}
	if errno != 0 {
		return fmt.Errorf("set the default action of %v: rt_sigaction: %w", sig, errno)
	}
	return nil
}
