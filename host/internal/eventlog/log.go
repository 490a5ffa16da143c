package eventlog

// Log is the event log as a host uses it: what the orchestrator, the
// service and the notifier read and write. Two implementations keep it: the
// Store (Pebble, embedded, the default) and the jetstreamlog package's
// (NATS JetStream, shared by several hosts). The conformance suite in
// eventlogtest runs every behaviour below against both.
//
// Writes that decide something (Append, EffectDone, UpdateDelivery,
// DeliveryDone) are the log's: a shared log orders them among every host.
// PutThreadState, PutArchive and SetMeta write what a host derives from
// the events alone (a thread's head and snapshot rebuilt, the parts that
// left a projection, the layout of its indexes): a shared log may keep
// them on the host that derived them.
type Log interface {
	// Append commits a batch atomically and returns its records and the
	// ids of its new outbox entries (append.go).
	Append(in Batch) ([]Record, []string, error)

	// Last is the last sequence readers may read, and a channel closed
	// when it moves (or the log closes).
	Last() (uint64, <-chan struct{})
	// After reads up to limit events after a sequence, in order.
	After(after uint64, limit int) ([]Record, error)
	// ThreadAfter reads up to limit events of one thread after a
	// sequence and up to upTo (0: no bound), in order.
	ThreadAfter(threadID string, after, upTo uint64, limit int) ([]Record, error)
	// HasThreadEvent says whether seq is an event of the thread.
	HasThreadEvent(threadID string, seq uint64) (bool, error)
	// Receipt is a command's receipt, kept for ever.
	Receipt(commandID string) ([]byte, bool, error)

	// Outbox lists the effects not yet performed, each thread's in the
	// order they were decided; EffectDone removes one.
	Outbox() ([]StoredEffect, error)
	EffectDone(ref EffectRef) error

	// A thread's head, live marker and snapshot (threadstate.go).
	ThreadSnapshot(threadID string) (Snapshot, bool, error)
	Heads(after string, limit int) ([]Head, error)
	Head(threadID string) ([]byte, bool, error)
	LiveThreads() ([]string, error)
	PutThreadState(threadID string, head []byte, live bool, sn *Snapshot) error

	// The parts that left a thread's projection (archive.go).
	PutArchive(threadID string, parts []ArchivePart) error
	Archive(threadID string, from, to, below uint32) ([]ArchivePart, error)
	ArchiveBefore(threadID string, ordinal, part, below uint32, limit int) ([]ArchivePart, error)

	// Notifications to deliver (delivery.go).
	Deliveries(target string) ([]StoredDelivery, error)
	UpdateDelivery(d StoredDelivery) error
	DeliveryDone(refs []DeliveryRef, states ...TargetState) error
	TargetStates() ([]TargetState, error)

	// The store's own metadata (meta.go).
	Meta(name string) ([]byte, bool, error)
	SetMeta(name string, v []byte) error

	// Failed is closed once the log has failed for good (fail.go);
	// Failure says why. A log that cannot reach its servers for a while
	// has not failed: its writes wait and retry.
	Failed() <-chan struct{}
	Failure() error
	// Close commits what is queued and closes the log; waiting readers
	// are woken with ErrClosed.
	Close() error
}

var _ Log = (*Store)(nil)
