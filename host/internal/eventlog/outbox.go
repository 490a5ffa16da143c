package eventlog

import "fmt"

// StoredEffect is a pending outbox entry.
type StoredEffect struct {
	ID       string
	ThreadID string
	Data     []byte
}

// EffectRef names an outbox entry.
type EffectRef struct {
	ThreadID string
	ID       string
}

// EffectDone removes a performed effect from the outbox (synced: an entry
// left behind would be reported as not performed by the next host). It is
// a commit of its own, through the sequencer (so it shares a synced write
// with others, and a store that failed refuses it as it does an append).
func (s *Store) EffectDone(ref EffectRef) error {
	if _, _, err := parseEffectID(ref.ID); err != nil {
		return err
	}
	if _, _, err := s.Append(Batch{Done: []EffectRef{ref}}); err != nil {
		return fmt.Errorf("remove effect %s of thread %s: %w", ref.ID, ref.ThreadID, err)
	}
	return nil
}

// Outbox returns every pending effect, by thread and in decided order.
func (s *Store) Outbox() (out []StoredEffect, err error) {
	err = s.read(func() error {
		out = nil // a read may be run again (see read)
		return s.scan([]byte{prefixOutbox}, func(k, v []byte) error {
			thread, id, err := parseOutboxKey(k)
			if err != nil {
				return err
			}
			out = append(out, StoredEffect{ID: id, ThreadID: thread, Data: append([]byte(nil), v...)})
			return nil
		})
	})
	return out, err
}
