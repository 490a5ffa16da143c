package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// HostEvent says that a host's own lease (HostKey) came (Alive: a process
// of that host took it) or went (not Alive: it was handed back, or it
// expired because its holder stopped renewing it). At is when the servers
// stored the change (for a lease held when the watch began: its last
// renewal), or, when they did not say, when the watcher read it.
type HostEvent struct {
	Host  string
	Alive bool
	At    time.Time
}

// Watcher reports the host leases of an installation as they come and go
// (Watch).
type Watcher struct {
	events chan HostEvent
	synced chan struct{} // closed once the leases present at the start are reported
	stop   context.CancelFunc
	done   chan struct{} // closed when the watcher's goroutine has ended

	mu  sync.Mutex
	err error // why it ended
}

// Watch reports the host leases of installation's bucket: first one event
// (Alive) per host whose lease is held now, then a change as it comes. A
// host is reported Alive when its lease appears, or when another process
// of it takes the lease over (its value changes), not at each renewal;
// it is reported gone (not Alive) when its lease is handed back or
// expires, once. The events come on an unbuffered channel, which closes
// when ctx ends, Stop is called, or the watch fails (Err says why). The
// bucket must exist: Open makes it.
//
// A watcher that loses the servers for longer than the bucket keeps the
// markers of expired leases (a minute) can miss that a lease expired;
// the host then stays Alive here until Alive says otherwise.
func Watch(ctx context.Context, js jetstream.JetStream, installation string) (*Watcher, error) {
	if err := CheckInstallation(installation); err != nil {
		return nil, fmt.Errorf("watch host leases: %w", err)
	}
	kv, err := js.KeyValue(ctx, Bucket(installation))
	if err != nil {
		return nil, fmt.Errorf("watch host leases of installation %s: open bucket %s: %w", installation, Bucket(installation), err)
	}
	wctx, stop := context.WithCancelCause(ctx)
	kw, err := kv.Watch(wctx, hostPrefix+"*")
	if err != nil {
		stop(nil)
		return nil, fmt.Errorf("watch host leases of installation %s: %w", installation, err)
	}
	w := &Watcher{events: make(chan HostEvent), synced: make(chan struct{}), stop: func() { stop(errors.New("the watcher was stopped")) },
		done: make(chan struct{})}
	go func() { // owned by the Watcher: Stop, or ctx's end, ends it
		defer close(w.done)
		defer close(w.events)
		defer kw.Stop()
		err := w.run(wctx, kw)
		w.mu.Lock()
		w.err = fmt.Errorf("watch host leases of installation %s: %w", installation, err)
		w.mu.Unlock()
	}()
	return w, nil
}

// run reads the key watcher's entries and sends their events until ctx
// ends or the key watcher closes.
func (w *Watcher) run(ctx context.Context, kw jetstream.KeyWatcher) error {
	holders := map[string]string{} // host -> the value of its lease while it is alive
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case e, ok = <-kw.Updates():
		}
		if !ok {
			if ctx.Err() != nil { // the key watcher ends with ctx too
				return context.Cause(ctx)
			}
			return errors.New("the servers ended the watch (the connection closed)")
		}
		if e == nil { // the leases present at the start are all read
			close(w.synced)
			continue
		}
		host, found := strings.CutPrefix(e.Key(), hostPrefix)
		if !found {
			continue
		}
		ev := HostEvent{Host: host, Alive: e.Operation() == jetstream.KeyValuePut, At: e.Created()}
		if ev.At.IsZero() {
			ev.At = time.Now()
		}
		prev, alive := holders[host]
		switch {
		case ev.Alive && alive && prev == string(e.Value()):
			continue // a renewal
		case ev.Alive:
			holders[host] = string(e.Value())
		case !alive:
			continue // gone already, or gone before the watch began
		default:
			delete(holders, host)
		}
		select {
		case w.events <- ev:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Events are the host leases' comings and goings (Watch); the channel
// closes when the watcher ends.
func (w *Watcher) Events() <-chan HostEvent { return w.events }

// Synced is closed once every host lease held when the watch began has
// been received from Events.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// Err is why the watcher ended (nil while it runs).
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop ends the watcher and waits for it.
func (w *Watcher) Stop() {
	w.stop()
	<-w.done
}

// Alive reads host's own lease in installation's bucket: its holder, and
// whether it is held now (false: it was never taken, was handed back, or
// expired). The bucket must exist: Open makes it.
func Alive(ctx context.Context, js jetstream.JetStream, installation, host string) (Holder, bool, error) {
	if err := CheckInstallation(installation); err != nil {
		return Holder{}, false, fmt.Errorf("read host %s's lease: %w", host, err)
	}
	if err := CheckHost(host); err != nil {
		return Holder{}, false, fmt.Errorf("read a host's lease on installation %s: %w", installation, err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, Bucket(installation))
	if err != nil {
		return Holder{}, false, fmt.Errorf("read host %s's lease on installation %s: open bucket %s: %w", host, installation,
			Bucket(installation), err)
	}
	h, ok, err := latest(ctx, kv, HostKey(host))
	if err != nil {
		return Holder{}, false, fmt.Errorf("read host %s's lease on installation %s: %w", host, installation, err)
	}
	return h, ok, nil
}
