package orchestrator

import "github.com/baton-run/baton/host/internal/eventlog"

// Store is the host's event log, for tests that act on it under a running
// host (compact it, so that its next reads go to the disk).
func (h *Host) Store() eventlog.Log { return h.store }

// DrainLogMargin is how long past DrainTimeout the drain of a host on a
// log Config.OpenLog opened waits for it (drainLogMargin).
const DrainLogMargin = drainLogMargin
