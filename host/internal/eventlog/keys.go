package eventlog

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
)

// The key layout. Every key the store writes is built and parsed here and
// nowhere else. Sequences are big-endian so that byte order is numeric
// order and a prefix scan reads in sequence order.
//
//	'e' | u64be(seq)                      -> event record (JSON)
//	't' | threadID | 0x00 | u64be(seq)    -> the event again, compact (the thread index; see indexValue)
//	'r' | commandID                       -> receipt (JSON)
//	'o' | threadID | 0x00 | u64be(seq) | u32be(i) -> outbox effect (opaque)
//	'h' | threadID                        -> the thread's head (opaque: what a thread list shows)
//	'l' | threadID                        -> empty: the thread was live (a restart must reconcile it)
//	'p' | threadID                        -> the thread's projection snapshot (see snapshot.go)
//	'a' | threadID | 0x00 | u32be(ordinal) | u32be(part) -> a part that left the thread's projection (opaque; see archive.go)
//	'n' | target | 0x00 | u64be(seq)      -> a notification to deliver to target about event seq (opaque; see delivery.go)
//	'd' | target                          -> what was delivered to target (opaque; see delivery.go)
//	'm' | name                            -> store metadata
//
// An outbox key names the last event of the batch that wrote the effect
// and the effect's place in it, so a prefix scan reads a thread's pending
// effects in the order they were decided. The head, live and snapshot keys
// of a thread are written in the batch of the events they follow from, so
// they never disagree with the log. A notification is written in the
// batch of the event it is about, so that a crash between the commit and
// its delivery loses none; a target (a webhook's URL) never contains 0x00
// (the notify package checks the URLs it accepts), and a scan of its
// prefix reads its notifications in event order.
// Thread ids never contain 0x00 (the orchestrator checks ids it accepts).
const (
	prefixEvent    = 'e'
	prefixThread   = 't'
	prefixReceipt  = 'r'
	prefixOutbox   = 'o'
	prefixHead     = 'h'
	prefixLive     = 'l'
	prefixSnapshot = 'p'
	prefixArchive  = 'a'
	prefixMeta     = 'm'
	prefixDelivery = 'n'
	prefixTarget   = 'd'
)

// threadStateKey is a thread's key under a one-byte prefix (head, live,
// snapshot).
func threadStateKey(prefix byte, threadID string) []byte {
	k := make([]byte, 0, len(threadID)+1)
	k = append(k, prefix)
	return append(k, threadID...)
}

func metaKey(name string) []byte { return append([]byte{prefixMeta}, name...) }

func eventKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixEvent
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

func parseEventKey(k []byte) (uint64, error) {
	if len(k) != 9 || k[0] != prefixEvent {
		return 0, fmt.Errorf("bad event key %x", k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

func threadPrefix(threadID string) []byte {
	k := make([]byte, 0, len(threadID)+2)
	k = append(k, prefixThread)
	k = append(k, threadID...)
	return append(k, 0)
}

func threadKey(threadID string, seq uint64) []byte {
	k := threadPrefix(threadID)
	return binary.BigEndian.AppendUint64(k, seq)
}

func parseThreadKey(k []byte) (uint64, error) {
	if len(k) < 10 || k[0] != prefixThread || k[len(k)-9] != 0 {
		return 0, fmt.Errorf("bad thread index key %x", k)
	}
	return binary.BigEndian.Uint64(k[len(k)-8:]), nil
}

// indexValue is an event as the thread index keeps it, so that a thread's
// events are read in one forward scan of its index, never looked up one by
// one in the global log: a format byte (1), the type's length (uvarint),
// the type, the time (varint Unix nanoseconds), then the data. The thread
// and the sequence are in the key. (An empty value, written by a Baton
// from before the index held events, means: read the global log.)
func indexValue(typ string, at time.Time, data []byte) []byte {
	v := make([]byte, 0, 1+binary.MaxVarintLen64*2+len(typ)+len(data))
	v = append(v, indexFormat)
	v = binary.AppendUvarint(v, uint64(len(typ)))
	v = append(v, typ...)
	v = binary.AppendVarint(v, at.UnixNano())
	return append(v, data...)
}

const indexFormat = 1

// parseIndexValue reads an index value back into a record.
func parseIndexValue(threadID string, seq uint64, v []byte) (Record, error) {
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("thread %s index entry of event %d is corrupt: %s", threadID, seq, what)
	}
	if v[0] != indexFormat {
		return bad(fmt.Sprintf("unknown format %d", v[0]))
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || uint64(len(v)-1-k) < n {
		return bad("bad type length")
	}
	typ := string(v[1+k : 1+k+int(n)])
	rest := v[1+k+int(n):]
	nanos, k := binary.Varint(rest)
	if k <= 0 {
		return bad("bad time")
	}
	data := rest[k:]
	if len(data) == 0 {
		return bad("no data")
	}
	return Record{Sequence: seq, ThreadID: threadID, Type: typ, At: time.Unix(0, nanos).UTC(),
		Data: append(json.RawMessage(nil), data...)}, nil
}

func receiptKey(commandID string) []byte {
	return append([]byte{prefixReceipt}, commandID...)
}

// upperBound is the smallest key greater than every key with prefix p.
func upperBound(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // the prefix is all 0xff: no upper bound
}

func outboxPrefix(threadID string) []byte {
	k := make([]byte, 0, len(threadID)+2)
	k = append(k, prefixOutbox)
	k = append(k, threadID...)
	return append(k, 0)
}

func outboxKey(threadID string, seq uint64, i uint32) []byte {
	k := binary.BigEndian.AppendUint64(outboxPrefix(threadID), seq)
	return binary.BigEndian.AppendUint32(k, i)
}

// effectID is an outbox entry's id as the orchestrator sees it.
func effectID(seq uint64, i uint32) string { return fmt.Sprintf("%d.%d", seq, i) }

func parseEffectID(id string) (seq uint64, i uint32, err error) {
	if _, err := fmt.Sscanf(id, "%d.%d", &seq, &i); err != nil || effectID(seq, i) != id {
		return 0, 0, fmt.Errorf("bad effect id %q", id)
	}
	return seq, i, nil
}

func parseOutboxKey(k []byte) (threadID, id string, err error) {
	if len(k) < 14 || k[0] != prefixOutbox || k[len(k)-13] != 0 {
		return "", "", fmt.Errorf("bad outbox key %x", k)
	}
	n := len(k)
	return string(k[1 : n-13]), effectID(binary.BigEndian.Uint64(k[n-12:n-4]), binary.BigEndian.Uint32(k[n-4:])), nil
}

func archivePrefix(threadID string) []byte {
	k := make([]byte, 0, len(threadID)+10)
	k = append(k, prefixArchive)
	k = append(k, threadID...)
	return append(k, 0)
}

func archiveKey(threadID string, ordinal, part uint32) []byte {
	k := binary.BigEndian.AppendUint32(archivePrefix(threadID), ordinal)
	return binary.BigEndian.AppendUint32(k, part)
}

func parseArchiveKey(k []byte) (ordinal, part uint32, err error) {
	if len(k) < 10 || k[0] != prefixArchive || k[len(k)-9] != 0 {
		return 0, 0, fmt.Errorf("bad archive key %x", k)
	}
	n := len(k)
	return binary.BigEndian.Uint32(k[n-8 : n-4]), binary.BigEndian.Uint32(k[n-4:]), nil
}

func deliveryPrefix(target string) []byte {
	k := make([]byte, 0, len(target)+10)
	k = append(k, prefixDelivery)
	k = append(k, target...)
	return append(k, 0)
}

func deliveryKey(target string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(deliveryPrefix(target), seq)
}

func parseDeliveryKey(k []byte) (DeliveryRef, error) {
	if len(k) < 10 || k[0] != prefixDelivery || k[len(k)-9] != 0 {
		return DeliveryRef{}, fmt.Errorf("bad notification key %x", k)
	}
	n := len(k)
	return DeliveryRef{Target: string(k[1 : n-9]), Seq: binary.BigEndian.Uint64(k[n-8:])}, nil
}
