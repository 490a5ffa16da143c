//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package agents

import (
	"errors"
	"os"
	"syscall"
)

// haveFileLock says tryLockFile locks across processes.
const haveFileLock = true

// tryLockFile takes an exclusive flock on f without blocking; false means
// another open file holds it (another process, or another install in
// this one: flocks belong to open files, not processes).
func tryLockFile(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}
