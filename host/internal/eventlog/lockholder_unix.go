//go:build unix

package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LockHolder says whether another process holds the store's lock, and
// which (pid 0: one the kernel does not name, in another pid namespace),
// asking without taking the lock or writing anything (fcntl F_GETLK on the
// LOCK file, opened to read): a reader, which takes no lock, can still say
// whose writes it may meet. fcntl locks belong to a process and closing
// any of its descriptors of the file releases them: a process that holds
// the lock must not call it.
func LockHolder(dir string) (held bool, pid int, err error) {
	f, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("ask who holds the event log: %w", err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return false, 0, fmt.Errorf("ask who holds the event log: %w", err)
	}
	if lk.Type == unix.F_UNLCK {
		return false, 0, nil
	}
	return true, int(lk.Pid), nil
}
