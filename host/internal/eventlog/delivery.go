package eventlog

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Notifications to deliver: each is written in the batch of the event it
// is about (Batch.Deliveries), so a crash between that commit and the
// delivery loses none, and removed once its target has it (DeliveryDone),
// so a restart sends again none that was delivered. The store keeps the
// values opaque: the notify package says what they hold.

// Delivery is a notification a batch writes: to Target, about the batch's
// event Events[Event]. Value builds the stored value once sequences are
// known: it is given the event's sequence.
type Delivery struct {
	Target string
	Event  int
	Value  func(seq uint64) []byte
}

// DeliveryRef names a stored notification: its target and its event.
type DeliveryRef struct {
	Target string
	Seq    uint64
}

// TargetState is what a target has been delivered, kept beside its
// notifications (a count, the last one): removed with a nil Value.
type TargetState struct {
	Target string
	Value  []byte
}

// StoredDelivery is a stored notification and its value.
type StoredDelivery struct {
	DeliveryRef
	Value []byte
}

// checkDeliveries refuses notifications a batch cannot write: one about an
// event the batch does not have, or to a target its key cannot hold.
func checkDeliveries(in Batch) error {
	for _, d := range in.Deliveries {
		if d.Event < 0 || d.Event >= len(in.Events) {
			return fmt.Errorf("a notification to %s names event %d of a batch of %d", d.Target, d.Event, len(in.Events))
		}
		if err := checkTarget(d.Target); err != nil {
			return err
		}
	}
	for _, d := range in.DeliveryUpdates {
		if err := checkTarget(d.Target); err != nil {
			return err
		}
	}
	for _, t := range in.TargetStates {
		if err := checkTarget(t.Target); err != nil {
			return err
		}
	}
	return nil
}

func checkTarget(target string) error {
	if target == "" || strings.ContainsRune(target, 0) {
		return fmt.Errorf("notification target %q is empty or holds a NUL byte", target)
	}
	return nil
}

// buildDeliveries adds a batch's notifications, their updates and
// removals to the Pebble batch; recs are the batch's events, with their
// sequences. Its Set and Delete errors cannot happen (see commit).
func buildDeliveries(b *pebble.Batch, in Batch, recs []Record) error {
	for _, d := range in.Deliveries {
		seq := recs[d.Event].Sequence
		if err := b.Set(deliveryKey(d.Target, seq), d.Value(seq), nil); err != nil {
			return err
		}
	}
	for _, d := range in.DeliveryUpdates {
		if err := b.Set(deliveryKey(d.Target, d.Seq), d.Value, nil); err != nil {
			return err
		}
	}
	for _, d := range in.DeliveriesDone {
		if err := b.Delete(deliveryKey(d.Target, d.Seq), nil); err != nil {
			return err
		}
	}
	for _, t := range in.TargetStates {
		k := append([]byte{prefixTarget}, t.Target...)
		if t.Value == nil {
			if err := b.Delete(k, nil); err != nil {
				return err
			}
		} else if err := b.Set(k, t.Value, nil); err != nil {
			return err
		}
	}
	return nil
}

// Deliveries returns the stored notifications to target (every target's,
// when it is ""), by target and in event order.
func (s *Store) Deliveries(target string) (out []StoredDelivery, err error) {
	prefix := []byte{prefixDelivery}
	if target != "" {
		prefix = deliveryPrefix(target)
	}
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		return s.scan(prefix, func(k, v []byte) error {
			ref, err := parseDeliveryKey(k)
			if err != nil {
				return err
			}
			out = append(out, StoredDelivery{DeliveryRef: ref, Value: append([]byte(nil), v...)})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read notifications: %w", err)
	}
	return out, nil
}

// UpdateDelivery rewrites a stored notification's value (what its tries
// met so far), synced, through the sequencer as an append is.
func (s *Store) UpdateDelivery(d StoredDelivery) error {
	if _, _, err := s.Append(Batch{DeliveryUpdates: []StoredDelivery{d}}); err != nil {
		return fmt.Errorf("record notification %d to %s: %w", d.Seq, d.Target, err)
	}
	return nil
}

// DeliveryDone removes notifications and writes their targets' states,
// synced, in one batch: once a target has one, or once it is no longer a
// target.
func (s *Store) DeliveryDone(refs []DeliveryRef, states ...TargetState) error {
	if len(refs) == 0 && len(states) == 0 {
		return nil
	}
	if _, _, err := s.Append(Batch{DeliveriesDone: refs, TargetStates: states}); err != nil {
		return fmt.Errorf("remove %d notifications: %w", len(refs), err)
	}
	return nil
}

// TargetStates returns the targets' states, by target.
func (s *Store) TargetStates() (out []TargetState, err error) {
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		return s.scan([]byte{prefixTarget}, func(k, v []byte) error {
			out = append(out, TargetState{Target: string(k[1:]), Value: append([]byte(nil), v...)})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read notification targets: %w", err)
	}
	return out, nil
}
