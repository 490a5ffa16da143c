package notify

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
)

// Document is what a delivery POSTs: one event that needs a person.
type Document struct {
	// ID is the delivery's, the same on every try (IDHeader too).
	ID       string            `json:"id"`
	Type     domain.NoticeType `json:"type"`
	ThreadID string            `json:"thread_id"`
	RunID    string            `json:"run_id,omitempty"`
	// Sequence is the event's in the log; At its time.
	Sequence uint64              `json:"sequence"`
	At       time.Time           `json:"at"`
	Title    string              `json:"title"`
	Detail   domain.NoticeDetail `json:"detail"`
}

// DeliveryID is the id of the delivery of a thread's event: a thread id
// is unique to its data dir, and a sequence within it.
func DeliveryID(threadID string, seq uint64) string {
	return fmt.Sprintf("%s-%d", threadID, seq)
}

// Entry is a delivery as the event log stores it: the document, encoded
// once when its event was committed (so every try sends the same bytes),
// and what its tries have met.
type Entry struct {
	Body json.RawMessage `json:"body"`
	// ID and Type are the document's, for a list to show.
	ID   string            `json:"id"`
	Type domain.NoticeType `json:"type"`
	// At is the event's time: GiveUpAfter counts from it.
	At time.Time `json:"at"`
	// Attempts counts the tries that failed; NextTry is when the next is
	// due (zero: at once); LastError says what the last one met.
	Attempts  int       `json:"attempts,omitempty"`
	NextTry   time.Time `json:"nextTry,omitzero"`
	LastError string    `json:"lastError,omitempty"`
	// Failed: it is given up (GiveUpAfter passed, or the target refused
	// it for good); it stays, listed, until its target is removed.
	Failed bool `json:"failed,omitempty"`
}

// NewEntry is the stored value of the delivery of a notice about a
// thread's event, once the event's sequence is known.
func NewEntry(threadID string, seq uint64, at time.Time, n domain.Notice) []byte {
	doc := Document{ID: DeliveryID(threadID, seq), Type: n.Type, ThreadID: threadID, RunID: n.RunID,
		Sequence: seq, At: at.UTC(), Title: n.Title, Detail: n.Detail}
	body, _ := json.Marshal(doc) // a document always encodes
	return encodeEntry(Entry{Body: body, ID: doc.ID, Type: doc.Type, At: doc.At})
}

func encodeEntry(e Entry) []byte {
	b, _ := json.Marshal(e) // an entry always encodes
	return b
}

// DecodeEntry reads a stored delivery.
func DecodeEntry(b []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("a stored webhook delivery is corrupt: %w", err)
	}
	return e, nil
}

// Delivered is what a target has been delivered: how many, and the last
// one (its id and when its receiver took it).
type Delivered struct {
	Count  int64     `json:"count"`
	LastID string    `json:"lastId,omitempty"`
	LastAt time.Time `json:"lastAt,omitzero"`
}

// DecodeDelivered reads a target's stored state.
func DecodeDelivered(b []byte) (Delivered, error) {
	var d Delivered
	if err := json.Unmarshal(b, &d); err != nil {
		return Delivered{}, fmt.Errorf("a webhook target's state is corrupt: %w", err)
	}
	return d, nil
}

// The backoff: after a delivery's n-th failed try the next waits
// FirstPause·2^(n-1), at most MaxPause; once the next try would come more
// than GiveUpAfter after the event, the delivery is given up. (1s, 2s,
// 4s, ... 512s, then every 10 minutes: about 150 tries in a day.)
const (
	FirstPause  = time.Second
	MaxPause    = 10 * time.Minute
	GiveUpAfter = 24 * time.Hour
)

// Pause is the wait after a delivery's n-th failed try (n from 1).
func Pause(n int) time.Duration {
	if n >= 20 { // 2^19 s is past MaxPause: no overflow
		return MaxPause
	}
	return min(FirstPause<<(n-1), MaxPause)
}

// failed records a failed try at now: when the next is due, or that the
// delivery is given up (for good: the target refused it so that the same
// request cannot succeed; or GiveUpAfter would pass first).
func (e Entry) failed(now time.Time, err error, forGood bool) Entry {
	e.Attempts++
	e.LastError = err.Error()
	next := now.Add(Pause(e.Attempts))
	if forGood || next.Sub(e.At) > GiveUpAfter {
		e.Failed, e.NextTry = true, time.Time{}
		return e
	}
	e.NextTry = next
	return e
}
