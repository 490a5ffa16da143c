package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A snapshot is a thread's projection as of one of its events (the
// watermark), so that loading the thread reads the snapshot and only the
// events after it. The store keeps it in an envelope it can check:
//
//	u8 format (1) | u16be schema | u64be watermark | u32be crc32c(body) | body
//
// The schema is the caller's: the version of the projection's encoding,
// so that a host whose projection changed can tell an old snapshot from a
// current one. The checksum catches a body that is not what was written.

// Snapshot is a stored projection snapshot.
type Snapshot struct {
	// Schema is the version of the body's encoding.
	Schema uint16
	// Seq is the watermark: the last event the body reflects.
	Seq  uint64
	Body []byte
}

const (
	snapshotFormat    = 1
	snapshotHeaderLen = 1 + 2 + 8 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptSnapshot says a snapshot cannot be trusted; its thread is
// rebuilt from its events.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

func encodeSnapshot(sn Snapshot) []byte {
	b := make([]byte, snapshotHeaderLen, snapshotHeaderLen+len(sn.Body))
	b[0] = snapshotFormat
	binary.BigEndian.PutUint16(b[1:], sn.Schema)
	binary.BigEndian.PutUint64(b[3:], sn.Seq)
	binary.BigEndian.PutUint32(b[11:], crc32.Checksum(sn.Body, castagnoli))
	return append(b, sn.Body...)
}

func decodeSnapshot(b []byte) (Snapshot, error) {
	if len(b) < snapshotHeaderLen {
		return Snapshot{}, fmt.Errorf("%w: %d bytes is shorter than its header", ErrCorruptSnapshot, len(b))
	}
	if b[0] != snapshotFormat {
		return Snapshot{}, fmt.Errorf("%w: unknown envelope format %d", ErrCorruptSnapshot, b[0])
	}
	sn := Snapshot{Schema: binary.BigEndian.Uint16(b[1:]), Seq: binary.BigEndian.Uint64(b[3:]), Body: b[snapshotHeaderLen:]}
	if sum := crc32.Checksum(sn.Body, castagnoli); sum != binary.BigEndian.Uint32(b[11:]) {
		return Snapshot{}, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorruptSnapshot, sum, binary.BigEndian.Uint32(b[11:]))
	}
	return sn, nil
}
