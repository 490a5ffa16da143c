package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Verification and salvage, for `baton doctor`: read the whole store, as
// no open does, and say what is damaged and which threads it touches;
// build a new store from what is intact.

// Problem is one thing found wrong.
type Problem struct {
	// File is the damaged file, when known.
	File string
	// What is wrong, in a sentence.
	What string
	// Seqs are the events it makes unreadable or missing (none: it touches
	// no event, or which ones cannot be told).
	Seqs []uint64
	// Threads are the threads it touches, when known.
	Threads []string
}

// Report is what Verify found.
type Report struct {
	Dir  string
	Seal SealState
	// Last is the last event the store holds (or its seal records, when
	// that is later).
	Last uint64
	// Events is how many events were read intact.
	Events int
	// Lost are sequences an earlier salvage could not save (recorded in
	// the store, so that their absence is no longer a problem).
	Lost     []uint64
	Problems []Problem
	// Heads are the readable thread heads, by thread id.
	Heads map[string][]byte
	// ThreadOf is each event's thread, where the events or the thread
	// index tell.
	ThreadOf map[uint64]string
}

// Healthy says nothing was found wrong.
func (r *Report) Healthy() bool { return len(r.Problems) == 0 }

func (r *Report) add(p Problem) { r.Problems = append(r.Problems, p) }

// The meta keys a salvage writes: the sequences it could not save, and
// the last sequence given before it (the store's sequences go on after
// it, even when the events at its end were lost).
const (
	metaLost = "lost"
	metaNext = "next"
)

// Verify reads a store read-only, whole: the checksums of every table
// (every key is read, and Pebble's level check), its write-ahead logs, its
// seal, and Baton's own consistency: every event decodes under its
// sequence, sequences run 1 to the last with none missing, the thread
// index agrees with the events, and outbox entries, heads, live markers
// and snapshots name threads and events that exist. A store that cannot be
// opened at all is one problem. The error is for what is not damage (the
// store is in use, or is not there).
func Verify(dir string) (*Report, *Store, error) {
	r := &Report{Dir: dir, Seal: readSeal(vfs.Default, dir), Heads: map[string][]byte{}}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		if ms, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*")); len(ms) == 0 {
			return nil, nil, fmt.Errorf("no event store in %s", dir)
		}
	}
	r.checkWALs()
	s, err := OpenWith(dir, Options{ReadOnly: true})
	if err != nil {
		var d *DamageError
		if !errors.As(err, &d) {
			return nil, nil, err
		}
		r.add(Problem{File: d.File, What: "the store cannot be opened: " + d.Err.Error()})
		// A newest log damaged mid-way: what precedes the damage reads
		// from a copy with the log cut there.
		if s, err = openCut(dir, d.File); err != nil {
			return r, nil, nil
		}
		r.add(Problem{File: d.File, What: "the store is read up to the log's first bad record; what the log held after it is lost"})
	}
	r.verify(s)
	return r, s, nil
}

// checkWALs reads every write-ahead log's records. Only the newest may end
// in a torn write (a crash mid-append, nothing of it acknowledged); the
// seal tells whether what it lost was committed.
func (r *Report) checkWALs() {
	wals := walFiles(r.Dir)
	for i, w := range wals {
		num, _ := strconv.ParseUint(filepath.Base(w)[:len(filepath.Base(w))-len(".log")], 10, 64)
		err := readWAL(w, num)
		switch {
		case err == nil:
		case errors.Is(err, record.ErrUnexpectedEOF) && i == len(wals)-1:
			// A torn final write, or a damaged tail: the seal decides.
		default:
			r.add(Problem{File: w, What: "the write-ahead log is damaged: " + err.Error()})
		}
	}
}

// walError is a write-ahead log's first record that cannot be read.
type walError struct {
	offset int64 // where the record begins
	err    error
}

func (e *walError) Error() string { return fmt.Sprintf("at offset %d: %v", e.offset, e.err) }
func (e *walError) Unwrap() error { return e.err }

// readWAL reads a write-ahead log to its end.
func readWAL(path string, num uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rr := newWALReader(record.NewReader, f, num)
	for {
		off := rr.Offset()
		rec, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &walError{offset: off, err: err}
		}
	}
}

// openCut opens, read-only, a copy of a store whose newest write-ahead
// log cannot be replayed, the log cut before its first bad record, so that
// what precedes the damage can be read. The copy is removed when the
// store closes.
func openCut(dir, wal string) (*Store, error) {
	wals := walFiles(dir)
	if len(wals) == 0 || wals[len(wals)-1] != wal {
		return nil, errors.New("not the newest log")
	}
	num, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(wal), ".log"), 10, 64)
	var we *walError
	if err := readWAL(wal, num); !errors.As(err, &we) {
		return nil, fmt.Errorf("no bad record in %s", wal)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".doctor-")
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	for _, e := range ents {
		if err != nil {
			break
		}
		if !e.Type().IsRegular() {
			continue
		}
		var b []byte
		if b, err = os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
			if e.Name() == filepath.Base(wal) {
				b = b[:we.offset]
			}
			err = os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o600)
		}
	}
	var s *Store
	if err == nil {
		s, err = OpenWith(tmp, Options{ReadOnly: true})
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	s.onClose = func() { os.RemoveAll(tmp) }
	return s, nil
}

// newWALReader calls record.NewReader, whose log number type is Pebble's
// internal one, with a log number.
func newWALReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return newReader(r, N(num))
}

func (r *Report) verify(s *Store) {
	last, err := s.lastSequence()
	lastRead := err == nil
	if !lastRead {
		r.add(Problem{File: fileOf(err), What: "the last event cannot be read: " + errText(err)})
		last = r.Seal.Sealed // the events up to it are probed one by one
	}
	if v, found, err := s.Meta(metaLost); err == nil && found {
		json.Unmarshal(v, &r.Lost) // written by Salvage; unreadable: none
	}
	r.Last = last
	if r.Seal.Err != nil {
		r.add(Problem{File: r.Seal.Path, What: "the seal is damaged (" + r.Seal.Err.Error() + "): it cannot tell whether committed events are missing"})
	} else if lastRead && r.Seal.Sealed > last {
		d := sealBroken(r.Dir, last, r.Seal.Sealed)
		p := Problem{File: d.File, What: d.Err.Error()}
		for q := last + 1; q <= r.Seal.Sealed; q++ {
			p.Seqs = append(p.Seqs, q)
		}
		r.add(p)
		r.Last = r.Seal.Sealed
	}
	if err := s.db.CheckLevels(nil); err != nil {
		err = s.damaged(err)
		r.add(Problem{File: fileOf(err), What: "the tables do not check: " + firstLine(errors.New(errText(err))).Error()})
	}
	threadOf, indexRead := r.checkIndex(s)
	r.ThreadOf = threadOf
	present := r.checkEvents(s, last, threadOf, indexRead)
	r.checkState(s, threadOf, present)
	// Threads a problem touches, where its events tell.
	for i := range r.Problems {
		p := &r.Problems[i]
		for _, q := range p.Seqs {
			if t, ok := threadOf[q]; ok && !slices.Contains(p.Threads, t) {
				p.Threads = append(p.Threads, t)
			}
		}
		slices.Sort(p.Threads)
	}
}

// checkIndex reads the thread index: which thread each event is, as far
// as it can be read.
func (r *Report) checkIndex(s *Store) (map[uint64]string, bool) {
	threadOf := map[uint64]string{}
	err := s.scan([]byte{prefixThread}, func(k, v []byte) error {
		seq, err := parseThreadKey(k)
		if err != nil {
			r.add(Problem{What: err.Error()})
			return nil
		}
		thread := string(k[1 : len(k)-9])
		threadOf[seq] = thread
		if len(v) > 0 {
			if _, err := parseIndexValue(thread, seq, v); err != nil {
				r.add(Problem{What: err.Error(), Seqs: []uint64{seq}})
			}
		}
		return nil
	})
	if err != nil {
		err = s.damaged(err)
		r.add(Problem{File: fileOf(err), What: "the thread index cannot be read past a damaged block: " + errText(err)})
		return threadOf, false
	}
	return threadOf, true
}

// checkEvents reads every event by itself, so that a damaged block hides
// only its own events.
func (r *Report) checkEvents(s *Store, last uint64, threadOf map[uint64]string, indexRead bool) (present map[uint64]bool) {
	present = map[uint64]bool{}
	lost := map[uint64]bool{}
	for _, q := range r.Lost {
		lost[q] = true
	}
	var missing, unindexed []uint64
	var unindexedThreads []string
	damaged := map[string]*Problem{}
	var order []string
	for q := uint64(1); q <= last; q++ {
		v, found, err := s.get(eventKey(q))
		if err != nil {
			err = s.damaged(err)
			f := fileOf(err)
			p, ok := damaged[f]
			if !ok {
				p = &Problem{File: f, What: "events cannot be read: " + errText(err)}
				damaged[f] = p
				order = append(order, f)
			}
			p.Seqs = append(p.Seqs, q)
			continue
		}
		if !found {
			if !lost[q] {
				missing = append(missing, q)
			}
			continue
		}
		rec, err := decodeRecord(eventKey(q), v)
		if err != nil {
			r.add(Problem{What: err.Error(), Seqs: []uint64{q}})
			continue
		}
		r.Events++
		present[q] = true
		switch t, ok := threadOf[q]; {
		case !ok:
			if indexRead { // else the index's damage is the problem
				unindexed = append(unindexed, q)
				if !slices.Contains(unindexedThreads, rec.ThreadID) {
					unindexedThreads = append(unindexedThreads, rec.ThreadID)
				}
			}
		case t != rec.ThreadID:
			r.add(Problem{What: fmt.Sprintf("the thread index gives event %d to thread %s; it is thread %s's", q, t, rec.ThreadID), Seqs: []uint64{q}, Threads: []string{rec.ThreadID, t}})
		}
		threadOf[q] = rec.ThreadID
	}
	for _, f := range order {
		r.add(*damaged[f])
	}
	if len(unindexed) > 0 {
		r.add(Problem{What: fmt.Sprintf("%d events are not in the thread index", len(unindexed)), Seqs: unindexed, Threads: unindexedThreads})
	}
	if len(missing) > 0 {
		r.add(Problem{What: fmt.Sprintf("%d events are missing from the log (%s)", len(missing), Ranges(missing)), Seqs: missing})
	}
	for q, t := range threadOf {
		if q > last {
			r.add(Problem{What: fmt.Sprintf("the thread index names event %d of thread %s, past the last event %d", q, t, last), Seqs: []uint64{q}, Threads: []string{t}})
		}
	}
	return present
}

// checkState reads the outbox, notifications, heads, live markers and
// snapshots.
func (r *Report) checkState(s *Store, threadOf map[uint64]string, present map[uint64]bool) {
	threads := map[string]bool{}
	for q, t := range threadOf {
		if present[q] {
			threads[t] = true
		}
	}
	has := func(thread string, seq uint64) bool { return present[seq] && threadOf[seq] == thread }
	scan := func(kind string, prefix byte, f func(k, v []byte)) {
		if err := s.scan([]byte{prefix}, func(k, v []byte) error { f(k, v); return nil }); err != nil {
			err = s.damaged(err)
			r.add(Problem{File: fileOf(err), What: kind + " cannot be read past a damaged block: " + errText(err)})
		}
	}
	scan("the outbox", prefixOutbox, func(k, _ []byte) {
		thread, id, err := parseOutboxKey(k)
		if err != nil {
			r.add(Problem{What: err.Error()})
			return
		}
		if seq, _, _ := parseEffectID(id); !has(thread, seq) {
			r.add(Problem{What: fmt.Sprintf("outbox entry %s of thread %s names event %d, which is not the thread's", id, thread, seq), Threads: []string{thread}})
		}
	})
	scan("the notifications", prefixDelivery, func(k, _ []byte) {
		ref, err := parseDeliveryKey(k)
		if err != nil {
			r.add(Problem{What: err.Error()})
			return
		}
		if !present[ref.Seq] {
			r.add(Problem{What: fmt.Sprintf("a notification to %s names event %d, which is not in the log", ref.Target, ref.Seq), Seqs: []uint64{ref.Seq}})
		}
	})
	scan("the thread heads", prefixHead, func(k, v []byte) {
		thread := string(k[1:])
		r.Heads[thread] = append([]byte(nil), v...)
		if !threads[thread] {
			r.add(Problem{What: fmt.Sprintf("thread %s has a head but no events", thread), Threads: []string{thread}})
		}
	})
	scan("the live markers", prefixLive, func(k, _ []byte) {
		if thread := string(k[1:]); !threads[thread] {
			r.add(Problem{What: fmt.Sprintf("thread %s is marked live but has no events", thread), Threads: []string{thread}})
		}
	})
	scan("the snapshots", prefixSnapshot, func(k, v []byte) {
		thread := string(k[1:])
		sn, err := decodeSnapshot(v)
		switch {
		case err != nil:
			r.add(Problem{What: fmt.Sprintf("the snapshot of thread %s: %v (it is rebuilt from the thread's events when loaded)", thread, err), Threads: []string{thread}})
		case !has(thread, sn.Seq):
			r.add(Problem{What: fmt.Sprintf("the snapshot of thread %s is as of event %d, which is not the thread's", thread, sn.Seq), Threads: []string{thread}})
		}
	})
	if _, indexed, _ := s.Meta("layout"); !indexed {
		return // a store from before the heads were kept: the host indexes it
	}
	for t := range threads {
		if _, ok := r.Heads[t]; !ok {
			r.add(Problem{What: fmt.Sprintf("thread %s has events but no head", t), Threads: []string{t}})
		}
	}
}

// fileOf is the file a *DamageError names ("" for other errors).
func fileOf(err error) string {
	var d *DamageError
	if errors.As(err, &d) {
		return d.File
	}
	return ""
}

// errText is what is wrong, without the file a *DamageError names.
func errText(err error) string {
	var d *DamageError
	if errors.As(err, &d) {
		return d.Err.Error()
	}
	return err.Error()
}

// Ranges writes sorted sequences as ranges: "3, 7-9".
func Ranges(seqs []uint64) string {
	var b bytes.Buffer
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if i == j {
			fmt.Fprintf(&b, "%d", seqs[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", seqs[i], seqs[j])
		}
		i = j + 1
	}
	return b.String()
}

// Salvage writes a new store in dst from what of s is intact: every event
// that reads and that keep accepts, under its own sequence, with its
// thread index entry; the receipts, outbox entries and notifications (of
// kept events) and metadata that read, except the layout (so that the host
// indexes the new store: heads, live markers and snapshots are rebuilt
// from the events).
// The sequences it could not save, with those lost before, are recorded
// in the new store (Report.Lost) and returned.
func (s *Store) Salvage(dst string, last uint64, keep func(Record) bool) (lost []uint64, err error) {
	out, err := Open(dst, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	kept := map[uint64]bool{}
	b := out.db.NewBatch()
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		err := b.Commit(pebble.Sync)
		b.Close()
		b = out.db.NewBatch()
		return err
	}
	for q := uint64(1); q <= last; q++ {
		v, found, err := s.get(eventKey(q))
		var rec Record
		if err == nil && found {
			rec, err = decodeRecord(eventKey(q), v)
		}
		if err != nil || !found || !keep(rec) {
			lost = append(lost, q)
			continue
		}
		kept[q] = true
		b.Set(eventKey(q), v, nil)
		b.Set(threadKey(rec.ThreadID, q), indexValue(rec.Type, rec.At, rec.Data), nil)
		if b.Len() > 4<<20 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	copyPrefix := func(prefix byte, ok func(k []byte) bool) {
		// What cannot be read past a damaged block is not copied.
		_ = s.scan([]byte{prefix}, func(k, v []byte) error {
			if ok(k) {
				b.Set(k, v, nil)
			}
			return nil
		})
	}
	copyPrefix(prefixReceipt, func([]byte) bool { return true })
	copyPrefix(prefixOutbox, func(k []byte) bool {
		_, id, err := parseOutboxKey(k)
		seq, _, _ := parseEffectID(id)
		return err == nil && kept[seq]
	})
	copyPrefix(prefixDelivery, func(k []byte) bool {
		ref, err := parseDeliveryKey(k)
		return err == nil && kept[ref.Seq]
	})
	copyPrefix(prefixTarget, func([]byte) bool { return true })
	copyPrefix(prefixMeta, func(k []byte) bool {
		name := string(k[1:])
		return name != "layout" && name != metaLost && name != metaNext
	})
	var before []uint64
	if v, found, err := s.Meta(metaLost); err == nil && found {
		json.Unmarshal(v, &before)
	}
	all := append(before, lost...)
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) > 0 {
		v, _ := json.Marshal(all)
		b.Set(metaKey(metaLost), v, nil)
	}
	b.Set(metaKey(metaNext), []byte(strconv.FormatUint(last, 10)), nil)
	if err := flush(); err != nil {
		return nil, err
	}
	b.Close()
	out.next = last // the seal Close writes
	return lost, nil
}
