// Package orchestrator is the host's core: it takes commands, decides them
// with the pure domain, commits their events and receipts in one batch,
// keeps the thread projections, and performs the effects through provider
// plugins.
//
// Threads run in parallel. Each thread has one writer at a time (commit.go);
// commits of different threads meet only in the event log's sequencer,
// where they share synced writes. A thread's projection is loaded when it
// is first touched, from its snapshot and the events after it, and leaves
// memory when it has not been touched for a while (threads.go); nothing at
// start reads the whole log.
//
// The files: commit.go is the one way anything is committed; threads.go the
// projections; streams.go what readers follow; recover.go what a start
// reconciles; outbox.go the effects; session.go the provider sessions;
// ingest.go their events; checkpoints.go the git work; drain.go what Close
// ends first, and the reaper of idle sessions; storefail.go what a store
// that fails under the host stops; rawframes.go the retention of the
// sessions' raw-frame logs; notify.go the webhooks; read.go the reads of a
// store without a host; readonly.go a host that only reads a data dir it
// cannot hold.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/checkpoint"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/mcpconf"
	"github.com/baton-run/baton/host/internal/notify"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/host/internal/rawframes"
	"github.com/baton-run/baton/sdk/clock"
)

// Config configures a host. The zero value of every field but DataDir works.
type Config struct {
	// DataDir holds the event log and the raw-frame logs (datadir.go).
	DataDir string
	// Command is what the host runs for ("baton run"), written with the
	// process's pid to the data dir's pid file: another process the data
	// dir refuses says which process holds it (BusyError).
	Command string
	// PluginDirs are searched for plugin binaries, in order.
	PluginDirs []string
	Logger     hclog.Logger
	// Clock tells the time of events and runs the host's timers: effect
	// retries, stream reconnects, session close timeouts, the checkpoint
	// lock's wait, the wait before a plugin that does not shut down is
	// killed (default clock.System).
	Clock clock.Clock
	// IDs allocates ids (default: randomly seeded).
	IDs *ids.Allocator
	// MaxThreads bounds how many threads' projections stay in memory
	// (default 256), the least recently used leaving first. A thread in
	// flight (a run or a session) never leaves, so more stay while more
	// than that many are in flight.
	MaxThreads int
	// IdleTimeout is how long a provider session that nothing uses (no run
	// active or queued, no request pending, no rollback in progress) stays
	// open after it was last used; then it is closed and its end recorded
	// with the reason idle. The thread's next run opens a new session,
	// resuming the provider's conversation where the plugin can. 0: never.
	IdleTimeout time.Duration
	// PluginCallTimeout bounds, on Clock, each call to a plugin (its
	// Describe as it starts, too; opening a session gets twice as long: it
	// starts a provider process); a plugin that does not answer in time is
	// killed, and what it was doing fails saying so (default
	// DefaultPluginCallTimeout). Closing a session is bounded by
	// sessionCloseTimeout.
	PluginCallTimeout time.Duration
	// SnapshotBytes is how many bytes of a thread's events, at least, come
	// between two of its snapshots (default 32 KiB; a snapshot is also
	// written when at least that many bytes follow one as large).
	SnapshotBytes int
	// Unattended: the host lives to run threads' unattended work (baton
	// serve), so it arms the waits a restart left, and a wait whose
	// instant passed while no host ran fires at once. A host embedded for
	// one command arms only the waits its own decisions arm and those of
	// the threads it follows (Follow): one that read a thread and closed
	// would otherwise start a continuation and stop it again at once. For
	// the same reason only an unattended host starts, as it opens, the
	// runs a host that stopped left queued; otherwise they go first when
	// the thread's next message comes.
	Unattended bool
	// InterruptGrace is how long, on Clock, a provider asked to stop a
	// turn has to end it before the host ends its process (through its
	// plugin: SIGTERM to the provider's process group, then SIGKILL) and
	// the run ends interrupted, saying it was forced (default
	// domain.DefaultInterruptGrace).
	InterruptGrace time.Duration
	// TurnStallTimeout is how long, on Clock, a run's provider may say
	// nothing mid-turn (nothing of the thread recorded) before the host
	// ends its process and the run fails, failure turn_stalled. A provider
	// waiting for an answer to its request is not silent. 0: never.
	TurnStallTimeout time.Duration
	// RequestTimeout is how long, on Clock, a provider's request may wait
	// for an answer before the host gives one: an approval is declined,
	// anything else cancelled, recorded as answered by the timeout. 0:
	// requests wait for ever.
	RequestTimeout time.Duration
	// RawFrames says whether plugins keep sessions' raw provider frames
	// (DATA/rawframes) and bounds them by size and age (rawframes.Policy;
	// the zero value keeps them, 256 MiB and 14 days at most).
	RawFrames rawframes.Policy
	// ReadOnly opens the host to read the data dir only (readonly.go): for
	// a data dir it cannot hold, on a read-only file system or held by
	// another process. It writes nothing and commits nothing.
	ReadOnly bool
	// Notify, when set, is where the host posts the events that need a
	// person (webhooks: notify.go); nil, in a host embedded for one
	// command, posts none.
	Notify *notify.Config
	// StoreFS is the file system the event log (DATA/events) runs on
	// (nil: the operating system's). Tests give one that fails under a
	// running host (eventlog.Options.FS); nothing else sets it.
	StoreFS vfs.FS
	// OpenLog, when set, opens the host's event log in place of the
	// Pebble store in DATA/events: `baton serve --store nats://...` gives
	// one that shares a JetStream stream with other hosts (jetstreamlog).
	OpenLog func() (eventlog.Log, error)
	// Host names this host on a log several hosts share (OpenLog): the
	// threads it creates are its own, and the runs it starts record it.
	// Such a host runs its own threads only and follows the others'
	// (shared.go). Empty: a host alone on its log.
	Host string
}

// Host is a running orchestrator.
type Host struct {
	cfg     Config
	log     hclog.Logger
	store   eventlog.Log
	plugins *pluginhost.Manager
	cps     *checkpoint.Service

	ctx    context.Context // ends at Close, once the sessions have closed
	cancel context.CancelFunc
	// stopping ends as Close begins (before its drain): waits that only
	// pause before trying again (a retry's, a reconnect's) end with it, so
	// that a shutdown does not wait them out.
	stopping context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup // effect workers and session pumps
	closed   atomic.Bool    // no more commands: the store is closing
	// draining is set as Close begins: runs are asked to stop and no
	// queued run starts (domain.Env.ShuttingDown).
	draining  atomic.Bool
	drainOnce sync.Once
	halted    atomic.Bool // Halt: Close kills the plugins rather than close sessions
	// drainErr says which runs the drain left active when its watchdog
	// gave up on the log (drain.go); set inside drainOnce, read by Close.
	drainErr error

	failure atomic.Pointer[error] // why the store failed (storefail.go)
	failed  chan struct{}         // closed once the host stopped for it

	cache    threadCache
	signals  signals  // the threads streams follow (streams.go)
	followed progress // on a shared log: the log's sequence it has applied to what it shows (follower.go)
	cmds     inflight // command ids being committed

	wmu     sync.Mutex // guards workers
	workers map[string]*worker

	timers timers // wait timers, by thread id (waits.go)
	// Deadlines, by thread id (deadline.go): interrupts' graces (stop.go),
	// silent turns' and unanswered requests' (stall.go).
	stops, stalls, expiries deadlines

	frames *framePruner   // raw-frame logs' retention (rawframes.go)
	mcp    *mcpconf.Store // the MCP servers configured in the data dir (mcp.go)

	notifier   *notify.Deliverer // the webhooks' (notify.go); nil: none
	delivering sync.Mutex        // held while the notifier runs, on a shared log (Deliver)

	smu      sync.Mutex
	sessions map[string]*liveSession // by thread id
	closing  bool
}

// Open opens the host on its data dir. Nothing of the log is read but what
// a restart must reconcile: threads that were live when the last host
// stopped, and effects it left in the outbox.
func Open(cfg Config) (*Host, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("open host: no data dir")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.IDs == nil {
		cfg.IDs = ids.New()
	}
	if cfg.MaxThreads <= 0 {
		cfg.MaxThreads = 256
	}
	if cfg.PluginCallTimeout <= 0 {
		cfg.PluginCallTimeout = DefaultPluginCallTimeout
	}
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = domain.DefaultInterruptGrace
	}
	if cfg.SnapshotBytes <= 0 {
		cfg.SnapshotBytes = 32 << 10
	}
	if cfg.ReadOnly {
		return openReadOnly(cfg)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open host: %w", err)
	}
	store, err := openLog(cfg)
	if err != nil {
		if berr := Busy(cfg.DataDir, err); berr != nil {
			return nil, berr
		}
		return nil, fmt.Errorf("open host: %w", err)
	}
	if err := holdDataDir(cfg, store); err != nil {
		return nil, fmt.Errorf("open host: %w", err)
	}
	h := newHost(cfg, store)
	h.frames = newFramePruner(cfg.DataDir, cfg.RawFrames, cfg.Clock) // its dir made private by holdDataDir
	h.mcp = mcpconf.NewStore(cfg.DataDir)
	if err := h.index(); err != nil {
		h.cancel()
		removeHolder(cfg.DataDir)
		store.Close()
		return nil, fmt.Errorf("open host: %w", err)
	}
	next := h.prunePass()
	h.wg.Go(func() { h.pruneFrames(next) })
	h.wg.Go(h.watchStore)
	h.startNotifier() // before recovery, whose events may call for deliveries
	// On a shared log, the others' commits from here on reach what this
	// host shows; its own are there when committed, and followLog skips
	// them. From before the recovery, which reads the threads it runs.
	var followFrom uint64
	if h.shared() {
		followFrom, _ = store.Last()
		h.followed.advance(followFrom)
	}
	if err := h.recover(); err != nil {
		h.Close()
		return nil, fmt.Errorf("open host: %w", err)
	}
	if h.shared() {
		h.wg.Go(func() { h.followLog(followFrom) })
	}
	return h, nil
}

// openLog opens the host's event log: the one cfg.OpenLog opens, or the
// Pebble store in DATA/events.
func openLog(cfg Config) (eventlog.Log, error) {
	if cfg.OpenLog != nil {
		return cfg.OpenLog()
	}
	return eventlog.OpenWith(filepath.Join(cfg.DataDir, "events"), eventlog.Options{Logger: cfg.Logger, FS: cfg.StoreFS})
}

// Close drains the host (drain.go: active runs are asked to stop and each
// one's end is recorded), closes live sessions (their provider processes
// stop and their last events are recorded), stops plugins and closes the
// log. Its error includes the store's failure, if the store failed
// (storefail.go).
//
// Order matters: runs end first, then sessions close (their ends are recorded), then the
// workers stop, then the plugins are killed, which ends any event stream
// still open, so that waiting for the goroutines cannot hang. Each wait is
// bounded on the host's clock: a session's end by 15 seconds, a plugin's
// exit, once asked to shut down, by sdk.DefaultKillGrace, after which its
// process is killed. On a log Config.OpenLog opened, whose writes may wait
// for servers, the drain is bounded too: its watchdog closes the log when
// the drain outlasts DrainTimeout by drainLogMargin (drain.go).
func (h *Host) Close() error {
	h.smu.Lock()
	if h.closing {
		h.smu.Unlock()
		return nil
	}
	h.closing = true
	h.stop()
	h.smu.Unlock()
	if h.cfg.ReadOnly {
		return h.closeReader()
	}
	h.drainOnce.Do(h.drain)
	halted := h.halted.Load()
	if !halted {
		h.closeSessions()
	}
	h.cancel()
	h.wmu.Lock() // a push that saw the host open has started its worker
	h.wmu.Unlock()
	if halted {
		h.plugins.CloseNow("the host was stopped at once")
	} else {
		h.plugins.Close()
	}
	h.wg.Wait()
	h.closed.Store(true)
	h.cache.wakeAll()
	err := removeHolder(h.cfg.DataDir) // while the lock is held: after, it may be another's
	err = errors.Join(err, h.drainErr)
	if f := h.store.Failure(); f != nil {
		err = errors.Join(err, &StoreFailedError{Cause: f}) // it failed, maybe as this Close drained
	}
	return errors.Join(err, h.store.Close())
}

// Halt ends the host's active runs at once, for a user who will not wait
// (a second Ctrl-C): no provider is asked to stop or waited for, each
// active run ends interrupted with ShutDownReason, and no queued run
// starts (the next host starts them). The host stays open for reads;
// Close then kills the plugins at once (their providers die with them)
// rather than closing their sessions, so it returns in moments. The
// sessions' ends are recorded as their event streams break, or by the
// next host's recovery.
func (h *Host) Halt() {
	h.halted.Store(true)
	h.stop()
	h.drainOnce.Do(func() { h.drainRuns(false) })
}

// closeSessions closes the live sessions, all at once, and waits for their
// ends (each for at most sessionCloseTimeout).
func (h *Host) closeSessions() {
	h.smu.Lock()
	live := make([]*liveSession, 0, len(h.sessions))
	for _, s := range h.sessions {
		live = append(live, s)
	}
	h.smu.Unlock()
	var wg sync.WaitGroup
	for _, s := range live {
		wg.Go(func() { s.close(h.cfg.Clock, h.log) })
	}
	wg.Wait()
}

// Drain ends the host's active runs, as Close does first (see drain), and
// leaves the host open: clients still read and follow the log, and see the
// runs end. A service drains before it ends its subscriptions, then
// closes; Close does not drain twice.
func (h *Host) Drain() {
	h.stop()
	if h.cfg.ReadOnly {
		return // it runs nothing
	}
	h.drainOnce.Do(h.drain)
}

// Clock is the host's clock: the one its events are dated by and its
// timers run on. A client that paces itself (a script's pauses) uses it too.
func (h *Host) Clock() clock.Clock { return h.cfg.Clock }

// ErrClosed is returned by Dispatch after Close began.
var ErrClosed = errors.New("host closed")

// Thread returns a copy of a thread's projection.
func (h *Host) Thread(id string) (domain.Thread, error) {
	t, err := h.view(id)
	if err != nil {
		return domain.Thread{}, err
	}
	return t.Clone(), nil
}

// Snapshot returns a thread's projection and the sequence of its last
// event: ThreadStream(ctx, id, seq), or Events(ctx, seq), then yields every
// later event of the thread exactly once.
func (h *Host) Snapshot(id string) (domain.Thread, uint64, error) {
	t, err := h.view(id)
	if err != nil {
		return domain.Thread{}, 0, err
	}
	return t.Clone(), t.Sequence, nil
}

// Threads lists threads in id order, after a thread id (for paging), up to
// limit (0: all), from the thread index. Thread ids made since they are
// time-ordered (ids.NewTimeID) sort by creation; older ones where their
// random digits put them.
func (h *Host) Threads(after string, limit int) ([]domain.ThreadSummary, error) {
	return threads(h.store, after, limit)
}

// LastSequence is the log's head.
func (h *Host) LastSequence() uint64 {
	last, _ := h.shown()
	return last
}

// ThreadEvents returns a thread's stored events after a sequence, up to
// the last one its projection shows: the events behind what Thread returns
// at the same moment. (A commit's projection is swapped in before the log
// publishes its sequence, so reading up to the log's last could miss the
// event a reader has just seen in the projection.)
func (h *Host) ThreadEvents(threadID string, after uint64) ([]eventlog.Record, error) {
	t, err := h.view(threadID)
	if err != nil {
		return nil, err
	}
	if after >= t.Sequence {
		return nil, nil
	}
	return h.store.ThreadAfter(threadID, after, t.Sequence, 0)
}
