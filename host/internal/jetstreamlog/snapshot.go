package jetstreamlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/nats-io/nats.go/jetstream"
)

// Snapshots: a write's snapshot goes into its host's replica (applied
// with its events) and, once the write is applied, into the
// installation's bucket (writer.go's putSnapshot), so that a host that
// never wrote a thread loads it from a snapshot too. The bucket keeps
// each thread's newest only.

// ensureBucket creates the snapshot bucket or opens the one there.
func (l *Log) ensureBucket(ctx context.Context, o Options) error {
	name := bucketName(l.inst)
	return retry(ctx, l.log, "find or create the bucket "+name, func(ctx context.Context) error {
		kv, err := l.js.KeyValue(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name,
				Description: "Baton's thread snapshots, the newest of each thread",
				History:     1, Storage: jetstream.FileStorage, Replicas: l.replicas(o)})
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = l.js.KeyValue(ctx, name) // another host made it first
			}
		}
		if err != nil {
			return err
		}
		l.kv = kv
		return nil
	})
}

// ThreadSnapshot is the replica's snapshot of a thread or, when it has
// none, the bucket's. A snapshot from the bucket whose watermark the
// replica has not reached yet is waited for (a while: then the thread
// replays from its events).
func (l *Log) ThreadSnapshot(threadID string) (eventlog.Snapshot, bool, error) {
	sn, found, err := l.store.ThreadSnapshot(threadID)
	if err != nil || found {
		return sn, found, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), tryTimeout)
	defer cancel()
	e, err := l.kv.Get(ctx, token(threadID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return eventlog.Snapshot{}, false, nil
	}
	if err != nil {
		l.log.Warn("the shared snapshot of a thread could not be read; it replays from its events", "thread", threadID, "error", err)
		return eventlog.Snapshot{}, false, nil
	}
	sn, err = parseSnapshotValue(e.Value())
	if err != nil {
		return eventlog.Snapshot{}, false, fmt.Errorf("snapshot of thread %s: %w", threadID, err)
	}
	for {
		last, moved := l.store.Last()
		if last >= sn.Seq {
			return sn, true, nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return eventlog.Snapshot{}, false, nil
		}
	}
}
