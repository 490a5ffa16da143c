package jetstreamlog

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/natstest"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A message whose After is not the replica's last event is void on every
// host: skipped, the sequence stays gapless, and the writes after it are
// applied.
func TestTheFoldSkipsAMessageThatFollowsTheWrongEvent(t *testing.T) {
	c := natstest.Single(t)
	a := host(t, c, "a", t.TempDir())
	appendOne(t, a, "T", 0)

	// A write that predicted it followed event 5 (a writer's pipelined
	// message that met another host's write), published as is.
	stale, err := json.Marshal(resolve("z", 5, eventlog.Batch{Events: []eventlog.Pending{event("T", 99)}}))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(t.Context(), threadSubject("baton", "T"), stale); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), logSubject("baton"), []byte("not a batch")); err != nil {
		t.Fatal(err)
	}
	appendOne(t, a, "T", 1)
	b := host(t, c, "b", t.TempDir())
	appendOne(t, b, "U", 0)
	waitLast(t, a, 3)
	for _, l := range []*Log{a, b} {
		var got []string
		for _, r := range all(t, l) {
			got = append(got, string(r.Data))
		}
		if d := cmp.Diff([]string{`{"i":0}`, `{"i":1}`, `{"i":0}`}, got); d != "" {
			t.Fatalf("host %s's events (-want +got):\n%s", l.host, d)
		}
		if err := l.Failure(); err != nil {
			t.Fatalf("host %s failed on a void message: %v", l.host, err)
		}
	}
}

// A stream that is there but is not a Baton log is refused, saying what
// differs.
func TestOpenRefusesAStreamOfOtherSubjects(t *testing.T) {
	c := natstest.Single(t)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: streamName("baton"), Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), Options{URLs: []string{c.URLs()}, Host: "a", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `its subjects are ["other.>"], not ["baton.baton.>"]`) {
		t.Fatalf("open on a stream of other subjects: %v", err)
	}
}

// A thread id is its own token when a subject can hold it, else its hex
// form, and the two never meet.
func TestThreadTokens(t *testing.T) {
	got := map[string]string{}
	for _, id := range []string{"t-1_A", "a.b", "a b", "*", ">", "x61", "x6", "é", ""} {
		got[id] = token(id)
	}
	want := map[string]string{"t-1_A": "t-1_A", "a.b": "x612e62", "a b": "x612062", "*": "x2a", ">": "x3e",
		"x61": "x783631", "x6": "x6", "é": "xc3a9", "": "x"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("tokens (-want +got):\n%s", d)
	}
}

// A replica of a stream since made again is refused: its watermark names
// messages the new stream never had.
func TestOpenRefusesAReplicaOfAnotherStream(t *testing.T) {
	c := natstest.Single(t)
	dir := t.TempDir()
	a := host(t, c, "a", dir)
	appendOne(t, a, "T", 0)
	a.Close()
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The stream denies deletes of messages, not of itself: an operator
	// can remove it.
	if err := js.DeleteStream(t.Context(), streamName("baton")); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), Options{URLs: []string{c.URLs()}, Host: "a", Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "remove it to rebuild it from this stream") {
		t.Fatalf("open of a replica of a deleted stream: %v", err)
	}
}

// A stream deleted under the log fails it: its writes fail rather than
// wait, and Failed says so.
func TestALogWhoseStreamIsGoneFails(t *testing.T) {
	c := natstest.Single(t)
	a := host(t, c, "a", t.TempDir())
	appendOne(t, a, "T", 0)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(t.Context(), streamName("baton")); err != nil {
		t.Fatal(err)
	}
	_, _, err = a.Append(eventlog.Batch{Events: []eventlog.Pending{event("T", 1)}})
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("an append to a deleted stream: %v", err)
	}
	<-a.Failed()
	if !errors.Is(a.Failure(), jetstream.ErrStreamNotFound) {
		t.Fatalf("the failure of a log whose stream is gone: %v", a.Failure())
	}
}
