package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// PIDFileName is the file in the data dir that names the process holding
// it: written once the event log's lock is held, removed as the host
// closes, and read only when the lock is refused (so that one a killed
// process left behind misleads no one: whoever holds the lock wrote its
// own).
const PIDFileName = "baton.pid"

// holder is the pid file's content.
type holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command,omitempty"` // what the process runs: "baton run"
	Started time.Time `json:"started"`
}

// writeHolder records this process as the data dir's holder: written
// whole to a new file, then renamed over the pid file, so that a reader
// never sees half of it.
func writeHolder(dataDir, command string, now time.Time) error {
	b, err := json.Marshal(holder{PID: os.Getpid(), Command: command, Started: now.UTC()})
	if err != nil { // unreachable: the struct always encodes
		return err
	}
	path := filepath.Join(dataDir, PIDFileName)
	tmp := path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write pid file: %w", err)
	}
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// removeHolder removes the pid file, while the lock is still held.
func removeHolder(dataDir string) error {
	if err := os.Remove(filepath.Join(dataDir, PIDFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove pid file: %w", err)
	}
	return nil
}

// BusyError is Open's error when another process holds the data dir (its
// event log's lock). PID and Command are what that process's pid file
// says (0 and "" when it has none, or none that reads).
type BusyError struct {
	DataDir string
	PID     int
	Command string
	Err     error // the lock's refusal
}

func (e *BusyError) Error() string {
	var who string
	switch {
	case e.PID != 0 && e.Command != "":
		who = fmt.Sprintf(" (pid %d, `%s`)", e.PID, e.Command)
	case e.PID != 0:
		who = fmt.Sprintf(" (pid %d)", e.PID)
	}
	return fmt.Sprintf("another Baton process%s holds the data dir %s", who, e.DataDir)
}

func (e *BusyError) Unwrap() error { return e.Err }

// Busy turns the event log's refusal of its lock into a BusyError naming
// the process that holds it; any other error is nil.
func Busy(dataDir string, err error) error {
	// fcntl's F_SETLK, which Pebble's lock uses, refuses a lock another
	// process holds with EAGAIN (EWOULDBLOCK is the same error).
	if !errors.Is(err, syscall.EAGAIN) {
		return nil
	}
	_, pid, _ := eventlog.LockHolder(filepath.Join(dataDir, "events")) // this process was refused: it holds no lock to lose
	e := holderOf(dataDir, pid)
	e.Err = err
	return e
}

// Holder is the process that holds the data dir now, as a BusyError (nil:
// none, or none that can be told), asked without taking the event log's
// lock or writing anything (eventlog.LockHolder): a reader, which takes no
// lock, says so whose writes it may meet. A process that holds the data
// dir must not call it.
func Holder(dataDir string) *BusyError {
	held, pid, err := eventlog.LockHolder(filepath.Join(dataDir, "events"))
	if err != nil || !held {
		return nil
	}
	return holderOf(dataDir, pid)
}

// holderOf names the process that holds the data dir: pid, as the lock
// says (0: it does not say), and what the pid file says of it. A pid file
// of another process (one a killed process left, while a process that
// wrote none holds the lock) is not believed.
func holderOf(dataDir string, pid int) *BusyError {
	e := &BusyError{DataDir: dataDir, PID: pid}
	b, err := os.ReadFile(filepath.Join(dataDir, PIDFileName))
	var h holder
	if err == nil && json.Unmarshal(b, &h) == nil && (pid == 0 || h.PID == pid) {
		e.PID, e.Command = h.PID, h.Command
	}
	return e
}
