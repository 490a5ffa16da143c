package jetstreamlog

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"regexp"
	"strconv"
	"time"

	"github.com/baton-run/baton/host/internal/eventlog"
)

// The layout. Every stream, subject, bucket, key, header and message this
// package writes is named, encoded and decoded here and nowhere else.
//
// One installation (Options.Installation, "baton" unless told) is one
// stream and one key-value bucket:
//
//	stream  BATON_<inst>                 subjects baton.<inst>.>
//	  baton.<inst>.thread.<token>        a decided write of one thread (a resolved batch)
//	  baton.<inst>.log                   a decided write of no one thread (EffectDone, deliveries, ...)
//	bucket  BATON_<inst>_SNAPSHOTS       key <token> -> a thread's newest snapshot (snapshotValue)
//
// Beside them, other packages use (each documents its own):
//
//	bucket  baton_<inst>_leases          the installation's lease and each host's (package lease)
//	subject batonapi.<inst>.host.<host>  calls another host carries to host <host>, request/reply,
//	                                     outside the stream (package apiforward)
//
// The stream keeps every message for ever (limits retention with no
// limits; deletes and purges denied): it is the log, and a host whose
// replica is lost rebuilds it from the stream's first message.
//
// A thread's token is its id when the id is [A-Za-z0-9_-]+ (and not "x"
// followed by hex), else "x" followed by the id's bytes in hex: a NATS
// token cannot hold '.', '*', '>' or spaces, and the two forms never meet.
//
// Each message is one decided write, a resolved batch (wireBatch, JSON
// with short keys): everything a replica needs to apply it, closures
// already called. Its headers:
//
//	Nats-Msg-Id                          <host>.<n>: unique per attempt (see writer.go)
//	Nats-Expected-Last-Sequence          the stream's last sequence the writer predicted
//	Nats-Expected-Last-Subject-Sequence  the thread subject's last sequence (thread subjects only)
//
// The global event sequence is the fold's (applier.go): a message is
// applied iff its After is the replica's last event sequence, else it is
// void (skipped by every host alike). A replica keeps the stream sequence
// it applied last as its watermark (metaWatermark, written in the batch of
// what it applied).
//
// A message is bounded by the server's max_payload (1 MiB unless told): a
// batch bigger than that is refused by the server and its Append fails.

// metaWatermark is the replica's metadata name for the stream sequence it
// applied last (a decimal number).
const metaWatermark = "jetstream.watermark"

// metaStream is the replica's metadata name for the stream it is a replica
// of: "<stream name>@<its creation time>", so that a replica of a stream
// since made again is refused rather than read against the wrong messages.
const metaStream = "jetstream.stream"

// streamName is an installation's stream.
func streamName(inst string) string { return "BATON_" + inst }

// bucketName is an installation's snapshot bucket.
func bucketName(inst string) string { return "BATON_" + inst + "_SNAPSHOTS" }

// subjects is what an installation's stream takes.
func subjects(inst string) []string { return []string{"baton." + inst + ".>"} }

// logSubject is the subject of writes that belong to no thread.
func logSubject(inst string) string { return "baton." + inst + ".log" }

// threadSubject is a thread's subject.
func threadSubject(inst, threadID string) string {
	return "baton." + inst + ".thread." + token(threadID)
}

var plainToken = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
var hexForm = regexp.MustCompile(`^x([0-9a-f][0-9a-f])*$`)

// token is a thread id as a subject token and a bucket key.
func token(threadID string) string {
	if plainToken.MatchString(threadID) && !hexForm.MatchString(threadID) {
		return threadID
	}
	return "x" + hex.EncodeToString([]byte(threadID))
}

// validInstallation says whether an installation name can be a stream
// name's and a subject token's part.
func validInstallation(inst string) error {
	if !plainToken.MatchString(inst) {
		return fmt.Errorf("installation %q must be letters, digits, '_' and '-'", inst)
	}
	return nil
}

// wireBatch is a resolved batch: an eventlog.Batch with its closures
// called for the predicted sequences, and what the fold needs to order it.
type wireBatch struct {
	Host  string `json:"h"`
	After uint64 `json:"a"`

	Events  []wireEvent          `json:"e,omitempty"`
	Effects []wireEffect         `json:"f,omitempty"`
	Done    []eventlog.EffectRef `json:"x,omitempty"`
	Command string               `json:"c,omitempty"`
	Receipt []byte               `json:"r,omitempty"`

	Thread  string                 `json:"t,omitempty"`
	Head    *[]byte                `json:"hd,omitempty"`
	Live    eventlog.LiveChange    `json:"l,omitempty"`
	Archive []eventlog.ArchivePart `json:"ar,omitempty"`

	Deliveries      []wireDelivery            `json:"d,omitempty"`
	DeliveryUpdates []eventlog.StoredDelivery `json:"du,omitempty"`
	DeliveriesDone  []eventlog.DeliveryRef    `json:"dd,omitempty"`
	TargetStates    []eventlog.TargetState    `json:"ts,omitempty"`
}

type wireEvent struct {
	Thread string          `json:"t"`
	Type   string          `json:"y"`
	At     int64           `json:"n"` // Unix nanoseconds
	Data   json.RawMessage `json:"d"`
}

type wireEffect struct {
	Thread string `json:"t"`
	Data   []byte `json:"d"`
}

type wireDelivery struct {
	Target string `json:"t"`
	Event  int    `json:"e"`
	Value  []byte `json:"v"`
}

// resolve calls a batch's closures as if its events followed after: the
// records, receipt, head and notifications it will have once applied.
func resolve(host string, after uint64, in eventlog.Batch) wireBatch {
	last := after + uint64(len(in.Events))
	w := wireBatch{Host: host, After: after, Done: in.Done, Command: in.CommandID, Thread: in.ThreadID,
		Live: in.Live, Archive: in.Archive, DeliveryUpdates: in.DeliveryUpdates,
		DeliveriesDone: in.DeliveriesDone, TargetStates: in.TargetStates}
	for _, e := range in.Events {
		w.Events = append(w.Events, wireEvent{Thread: e.ThreadID, Type: e.Type, At: e.At.UnixNano(), Data: e.Data})
	}
	for _, e := range in.Effects {
		w.Effects = append(w.Effects, wireEffect{Thread: e.ThreadID, Data: e.Data})
	}
	if in.CommandID != "" {
		w.Receipt = in.Receipt(last)
	}
	if in.Head != nil {
		h := in.Head(last)
		w.Head = &h
	}
	for _, d := range in.Deliveries {
		w.Deliveries = append(w.Deliveries, wireDelivery{Target: d.Target, Event: d.Event, Value: d.Value(after + uint64(d.Event) + 1)})
	}
	return w
}

// batch is the eventlog.Batch that applies a resolved batch to a replica.
func (w wireBatch) batch() eventlog.Batch {
	b := eventlog.Batch{Done: w.Done, CommandID: w.Command, ThreadID: w.Thread, Live: w.Live, Archive: w.Archive,
		DeliveryUpdates: w.DeliveryUpdates, DeliveriesDone: w.DeliveriesDone, TargetStates: w.TargetStates}
	for _, e := range w.Events {
		b.Events = append(b.Events, eventlog.Pending{ThreadID: e.Thread, Type: e.Type, At: timeOf(e.At), Data: e.Data})
	}
	for _, e := range w.Effects {
		b.Effects = append(b.Effects, eventlog.Effect{ThreadID: e.Thread, Data: e.Data})
	}
	if w.Command != "" {
		r := w.Receipt
		b.Receipt = func(uint64) []byte { return r }
	}
	if w.Head != nil {
		h := *w.Head
		b.Head = func(uint64) []byte { return h }
	}
	for _, d := range w.Deliveries {
		v := d.Value
		b.Deliveries = append(b.Deliveries, eventlog.Delivery{Target: d.Target, Event: d.Event, Value: func(uint64) []byte { return v }})
	}
	return b
}

// subject is the subject a resolved batch is published on: its thread's,
// when the batch names one thread (its ThreadID, or the thread of all its
// events), else the log's.
func subject(inst string, in eventlog.Batch) (string, string) {
	thread := in.ThreadID
	for _, e := range in.Events {
		if thread == "" {
			thread = e.ThreadID
		}
		if e.ThreadID != thread {
			return logSubject(inst), ""
		}
	}
	if thread == "" {
		return logSubject(inst), ""
	}
	return threadSubject(inst, thread), thread
}

// A snapshot in the bucket: its schema, its watermark, a checksum of its
// body, then the body.
//
//	u16be schema | u64be watermark | u32be crc32c(body) | body
const snapshotHeaderLen = 2 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func snapshotValue(sn eventlog.Snapshot) []byte {
	b := make([]byte, snapshotHeaderLen, snapshotHeaderLen+len(sn.Body))
	binary.BigEndian.PutUint16(b, sn.Schema)
	binary.BigEndian.PutUint64(b[2:], sn.Seq)
	binary.BigEndian.PutUint32(b[10:], crc32.Checksum(sn.Body, castagnoli))
	return append(b, sn.Body...)
}

func parseSnapshotValue(b []byte) (eventlog.Snapshot, error) {
	if len(b) < snapshotHeaderLen {
		return eventlog.Snapshot{}, fmt.Errorf("%w: %d bytes is shorter than its header", eventlog.ErrCorruptSnapshot, len(b))
	}
	sn := eventlog.Snapshot{Schema: binary.BigEndian.Uint16(b), Seq: binary.BigEndian.Uint64(b[2:]),
		Body: append([]byte(nil), b[snapshotHeaderLen:]...)}
	if sum, want := crc32.Checksum(sn.Body, castagnoli), binary.BigEndian.Uint32(b[10:]); sum != want {
		return eventlog.Snapshot{}, fmt.Errorf("%w: checksum %08x, want %08x", eventlog.ErrCorruptSnapshot, sum, want)
	}
	return sn, nil
}

func parseWatermark(v []byte) (uint64, error) {
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the replica's watermark %q is not a sequence", v)
	}
	return n, nil
}

// timeOf is an event's time from its Unix nanoseconds.
func timeOf(nanos int64) time.Time { return time.Unix(0, nanos).UTC() }
