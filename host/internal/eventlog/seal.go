package eventlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The seal is Baton's own check that committed events do not vanish.
// Pebble recovers its newest write-ahead log up to the first record it
// cannot read and, when that looks like a torn final write, says nothing:
// a damaged log would lose synced events silently. The seal is a small
// file beside Pebble's (SealName in the store's directory) that records
// the last committed sequence:
//
//	"BTNSEAL1" | u64be last sequence | u32be crc32c(the 16 bytes before)
//
// It is written, one pwrite at offset 0, after each commit group is
// durable, and at Close (synced there). It needs no fsync of its own at
// each commit: it is written only after the log's fsync has returned, so
// the sequence it names is durable before it is written, and a seal that
// did not reach the disk (power loss) is an older seal. It can lag the
// log, never lead it, with two exceptions an Open reports rather than
// trusts: a seal torn by power loss mid-write (its checksum fails: a
// warning, and a new seal is written), and a disk that acknowledged the
// log's fsync without keeping it (then the seal rightly says events are
// missing). A copy of a data dir taken while a host ran may pair a seal
// with an older log; `baton doctor` tells which.
//
// An Open whose log ends before the seal refuses, before Pebble writes
// anything: the store is opened read-only first to learn its last
// sequence (see Open).

// SealName is the seal's file name in the store's directory.
const SealName = "BATON-SEAL"

const (
	sealMagic = "BTNSEAL1"
	sealLen   = len(sealMagic) + 8 + 4
)

func encodeSeal(seq uint64) []byte {
	b := make([]byte, sealLen)
	copy(b, sealMagic)
	binary.BigEndian.PutUint64(b[len(sealMagic):], seq)
	binary.BigEndian.PutUint32(b[sealLen-4:], crc32.Checksum(b[:sealLen-4], castagnoli))
	return b
}

// errSealDamaged says the seal cannot be read.
var errSealDamaged = errors.New("damaged")

func decodeSeal(b []byte) (uint64, error) {
	if len(b) != sealLen {
		return 0, fmt.Errorf("%w: %d bytes, want %d", errSealDamaged, len(b), sealLen)
	}
	if string(b[:len(sealMagic)]) != sealMagic {
		return 0, fmt.Errorf("%w: not a seal (it begins %q)", errSealDamaged, b[:len(sealMagic)])
	}
	if sum, want := crc32.Checksum(b[:sealLen-4], castagnoli), binary.BigEndian.Uint32(b[sealLen-4:]); sum != want {
		return 0, fmt.Errorf("%w: checksum %08x, want %08x", errSealDamaged, sum, want)
	}
	return binary.BigEndian.Uint64(b[len(sealMagic):]), nil
}

// SealState is what the seal said when the store opened.
type SealState struct {
	// Path is the seal's file.
	Path string
	// Found says the seal was there.
	Found bool
	// Sealed is the last committed sequence it records (when Err is nil).
	Sealed uint64
	// Err says why it cannot be read (nil: it was read, or not found).
	Err error
}

// readSeal reads the seal in dir, on the store's file system.
func readSeal(fs vfs.FS, dir string) SealState {
	st := SealState{Path: fs.PathJoin(dir, SealName)}
	b, err := readFile(fs, st.Path)
	switch {
	case oserror.IsNotExist(err):
		return st
	case err != nil:
		st.Found, st.Err = true, err
		return st
	}
	st.Found = true
	st.Sealed, st.Err = decodeSeal(b)
	return st
}

func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// sealWriter keeps the seal open for the sequencer's writes.
type sealWriter struct {
	f vfs.File
}

// openSeal opens the seal for writing, on the store's file system (where
// Pebble's files are: a test of a power loss loses what the seal did not
// sync, as it does Pebble's). The store's file system makes it 0600.
func openSeal(fs vfs.FS, dir string) (*sealWriter, error) {
	f, err := fs.OpenReadWrite(fs.PathJoin(dir, SealName), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("open the store's seal: %w", err)
	}
	return &sealWriter{f: f}, nil
}

// write records seq as committed: one write at offset 0. The seal is
// always the same length, so a write never leaves a longer, older one's
// bytes behind.
func (w *sealWriter) write(seq uint64) error {
	if w == nil { // read-only
		return nil
	}
	if _, err := w.f.WriteAt(encodeSeal(seq), 0); err != nil {
		return fmt.Errorf("write the store's seal: %w", err)
	}
	return nil
}

// close writes seq, syncs and closes the seal.
func (w *sealWriter) close(seq uint64) error {
	err := w.write(seq)
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// walFiles are the write-ahead logs in dir, oldest first.
func walFiles(dir string) []string {
	ents, _ := os.ReadDir(dir) // a directory that cannot be read has none
	type wal struct {
		num  uint64
		name string
	}
	var wals []wal
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(base, 10, 64); err == nil {
			wals = append(wals, wal{n, e.Name()})
		}
	}
	slices.SortFunc(wals, func(a, b wal) int { return cmp.Compare(a.num, b.num) })
	out := make([]string, len(wals))
	for i, w := range wals {
		out[i] = filepath.Join(dir, w.name)
	}
	return out
}

// sealBroken is the refusal of a store that ends before its seal: its
// newest write-ahead log (the one Pebble reads up to a damaged record
// without a word) is named, as the likely place of the damage.
func sealBroken(dir string, last, sealed uint64) *DamageError {
	d := &DamageError{Err: fmt.Errorf("the store ends at sequence %d but %d were committed (%s records them): "+
		"events %d to %d are missing; nothing was written", last, sealed, SealName, last+1, sealed)}
	if wals := walFiles(dir); len(wals) > 0 {
		d.File = wals[len(wals)-1]
		d.Err = fmt.Errorf("the write-ahead log is damaged: %w", d.Err)
	}
	return d
}
