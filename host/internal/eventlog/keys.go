package eventlog

import (
	"encoding/binary"
	"fmt"
)

// The key layout. Every key the store writes is built and parsed here and
// nowhere else. Sequences are big-endian so that byte order is numeric
// order and a prefix scan reads in sequence order.
//
//	'e' | u64be(seq)                      -> event record (JSON)
//	't' | threadID | 0x00 | u64be(seq)    -> empty (the thread index)
//	'r' | commandID                       -> receipt (JSON)
//
// Thread ids never contain 0x00 (the orchestrator checks ids it accepts).
const (
	prefixEvent   = 'e'
	prefixThread  = 't'
	prefixReceipt = 'r'
)

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
