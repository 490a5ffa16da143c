package orchestrator

import "errors"

// A store that fails under a running host. However the event log fails (a
// commit error, damage met by a read, Pebble giving up on a full or
// failing disk: eventlog's fail.go), the host ends the same way, at once:
// it takes no more commands (ErrStoreFailed), its waits, retries and
// deadlines stop, and its plugins are killed, which ends every provider
// process and so every turn in flight: nothing goes on that the log
// cannot record. Nothing is written: the store cannot record it. Failed
// tells the host's owner, which stops (`baton serve` exits 1 so that its
// supervisor starts it again); the next host's recovery ends what was in
// flight with a reason, as after a kill.
//
// The host does not reopen the store in place. A reopen would have to do
// what a start does (reconcile the runs whose providers were killed, the
// effects left in the outbox, the sessions' streams) with this host's
// memory in between, for a failure that may be the disk's and come back at
// once; a new process starts from the log alone, by the recovery every
// restart already goes through.

// ErrStoreFailed is what a command gets once the host's event store has
// failed (errors.Is): a *StoreFailedError, which says why.
var ErrStoreFailed = errors.New("the event store failed")

// StoreFailedError is the error of every command once the host's event
// store has failed: Cause is the store's failure.
type StoreFailedError struct{ Cause error }

func (e *StoreFailedError) Error() string {
	return "the event store failed, so nothing more can be recorded; the host is stopping: " + e.Cause.Error()
}

// Is makes it ErrStoreFailed.
func (e *StoreFailedError) Is(target error) bool { return target == ErrStoreFailed }

func (e *StoreFailedError) Unwrap() error { return e.Cause }

// Failed is closed once the host's event store has failed and the host has
// stopped its work (its providers killed); Failure says why. Its owner
// then closes it.
func (h *Host) Failed() <-chan struct{} { return h.failed }

// Failure is why the host's event store failed (a *StoreFailedError), or
// nil.
func (h *Host) Failure() error {
	if err := h.failure.Load(); err != nil {
		return *err
	}
	return nil
}

// watchStore stops the host when its store fails (fail), until the host
// closes.
func (h *Host) watchStore() {
	select {
	case <-h.store.Failed():
		h.fail(h.store.Failure())
	case <-h.ctx.Done():
	}
}

// fail stops the host's work once its store has failed: no command is
// taken, no run is drained (its end cannot be recorded), waits and
// retries end, and the plugins are killed at once. Close then closes what
// is left.
func (h *Host) fail(cause error) {
	var err error = &StoreFailedError{Cause: cause}
	if !h.failure.CompareAndSwap(nil, &err) {
		return
	}
	h.log.Error("the event store failed; stopping every provider and taking no more commands", "error", cause)
	h.halted.Store(true) // Close kills the plugins, and closes no session (its end cannot be recorded)
	h.drainOnce.Do(func() { h.draining.Store(true) })
	h.stop()
	h.plugins.CloseNow("the host's event store failed")
	close(h.failed)
}

// storeFailed is the error of a command once the store has failed, or
// nil: also in the moment between the store failing and the watcher
// stopping the host.
func (h *Host) storeFailed() error {
	if f := h.Failure(); f != nil {
		return f
	}
	if cause := h.store.Failure(); cause != nil {
		return &StoreFailedError{Cause: cause}
	}
	return nil
}
