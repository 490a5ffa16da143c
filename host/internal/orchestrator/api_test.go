package orchestrator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk"
)

// The host's API refuses what it cannot do, at once, with an error a
// client can tell apart, and stores nothing for it.

// refusal is an error as a client tells it apart: the sentinel it wraps,
// and its text.
type refusal struct {
	Sentinel string
	Text     string
}

// refused names the sentinel an error wraps, with its text.
func refused(err error) refusal {
	if err == nil {
		return refusal{Sentinel: "none"}
	}
	for _, s := range []struct {
		name string
		err  error
	}{{"invalid", domain.ErrInvalid}, {"not found", domain.ErrNotFound}, {"conflict", domain.ErrConflict},
		{"not resumable", sdk.ErrNotResumable}, {"closed", orchestrator.ErrClosed}} {
		if errors.Is(err, s.err) {
			return refusal{s.name, err.Error()}
		}
	}
	return refusal{"other", err.Error()}
}

// Open needs a data dir it can make and an event log it can open there.
func TestOpenNeedsAUsableDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventsIsAFile := t.TempDir()
	if err := os.WriteFile(filepath.Join(eventsIsAFile, "events"), []byte("not a log"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir, want string
	}{
		{"no data dir", "", "open host: no data dir"},
		{"a data dir under a file", filepath.Join(file, "data"), "open host: mkdir " + file + ": not a directory"},
		{"an event log that is a file", eventsIsAFile, "open host: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, _, err := openHost(t, c.dir)
			if err == nil {
				h.Close()
				t.Fatal("the host opened")
			}
			if !strings.HasPrefix(err.Error(), c.want) || (c.want == "open host: " && !strings.Contains(err.Error(), "events")) {
				t.Errorf("open: %v; want %q", err, c.want)
			}
		})
	}
}

// Commands the host cannot take are refused before anything is decided
// or stored: ids that are empty, too long, not UTF-8 or hold a NUL byte,
// and a command with no payload.
func TestDispatchRefusesMalformedCommands(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/simple.ndjson")
	head := e.host.LastSequence()
	send := domain.DispatchMessage{Text: "hi"}
	long := strings.Repeat("x", 257)
	for _, c := range []struct {
		name string
		cmd  domain.Command
		want refusal
	}{
		{"no command id", domain.Command{ThreadID: threadID, Payload: send}, refusal{"invalid", "invalid command: no commandId"}},
		{"a command id too long", domain.Command{ID: long, ThreadID: threadID, Payload: send},
			refusal{"invalid", `invalid command: commandId "` + long + `" is too long, not UTF-8 or holds a NUL byte`}},
		{"a command id with a NUL", domain.Command{ID: "a\x00b", ThreadID: threadID, Payload: send},
			refusal{"invalid", `invalid command: commandId "a\x00b" is too long, not UTF-8 or holds a NUL byte`}},
		{"a command id not UTF-8", domain.Command{ID: "a\xffb", ThreadID: threadID, Payload: send},
			refusal{"invalid", `invalid command: commandId "a\xffb" is too long, not UTF-8 or holds a NUL byte`}},
		{"no payload", domain.Command{ID: "c1", ThreadID: threadID}, refusal{"invalid", "invalid command: command c1 has no payload"}},
		{"no thread id", domain.Command{ID: "c2", Payload: send}, refusal{"invalid", "invalid command: no threadId"}},
		{"a thread id with a NUL", domain.Command{ID: "c3", ThreadID: "t\x00", Payload: send},
			refusal{"invalid", `invalid command: threadId "t\x00" is too long, not UTF-8 or holds a NUL byte`}},
		{"an answer on a thread that does not exist", domain.Command{ID: "c4", ThreadID: "thr-none",
			Payload: domain.RespondToRequest{RequestID: "req-1", Decision: domain.DecisionAccept}}, refusal{"not found", `not found: thread "thr-none"`}},
	} {
		_, err := e.host.Dispatch(t.Context(), c.cmd)
		if diff := cmp.Diff(c.want, refused(err)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	if got := e.host.LastSequence(); got != head {
		t.Errorf("refused commands stored events: head %d -> %d", head, got)
	}
	if _, err := e.host.Dispatch(t.Context(), domain.Command{ID: "c1", ThreadID: threadID, Payload: send}); err != nil {
		t.Errorf("the id of a refused command is not taken: %v", err)
	}
}

// Reading a thread that does not exist says so.
func TestReadsOfAThreadThatDoesNotExist(t *testing.T) {
	e := newEnv(t)
	_, err := e.host.Thread("thr-none")
	got := []refusal{refused(err)}
	_, _, err = e.host.Snapshot("thr-none")
	got = append(got, refused(err))
	_, _, err = e.host.Diff(t.Context(), "thr-none", 0, 0)
	got = append(got, refused(err))
	nf := refusal{"not found", `not found: thread "thr-none"`}
	if diff := cmp.Diff([]refusal{nf, nf, nf}, got); diff != "" {
		t.Errorf("thread, snapshot, diff (-want +got):\n%s", diff)
	}
}

// A diff needs a run with a checkpoint: with no run named, the newest run
// whose checkpoint is ready; else the run named.
func TestDiffOfARunWithNoCheckpoint(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/simple.ndjson")
	var got []refusal
	for _, run := range []int{0, 3} {
		_, _, err := e.host.Diff(t.Context(), threadID, run, 0)
		got = append(got, refused(err))
	}
	want := []refusal{
		{"not found", "not found: thread " + threadID + " has no run with a ready checkpoint"},
		{"not found", "not found: run 3 of thread " + threadID + " has no checkpoint"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diffs (-want +got):\n%s", diff)
	}
}

// The host's clock is the one it was given: a client that paces itself by
// it (a script's pauses) moves with the host's timers.
func TestHostClockIsTheOneConfigured(t *testing.T) {
	e := newEnv(t)
	if e.host.Clock() != e.clock {
		t.Fatalf("host clock %v, want the configured fake", e.host.Clock())
	}
}

// A stream ends when its reader's context does, a stream waiting for more
// ends when the host closes, and a stream asked of a closed host ends at
// once, yielding nothing. A closed host refuses commands and lists no
// threads.
func TestStreamsEnd(t *testing.T) {
	e := newEnv(t)
	threadID := e.createThread("acp", "acp/simple.ndjson")
	_, at, err := e.host.Snapshot(threadID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan []string, 1)
	go func() {
		var got []string
		for r, err := range e.host.ThreadStream(ctx, threadID, at-1) {
			if err != nil {
				got = append(got, err.Error())
				break
			}
			got = append(got, r.Type)
			cancel() // the first event read: the reader goes
		}
		ended <- got
	}()
	if diff := cmp.Diff([]string{"thread.created"}, <-ended); diff != "" {
		t.Errorf("stream until its reader went (-want +got):\n%s", diff)
	}
	h, last := e.host, e.host.LastSequence()
	e.host = nil
	waiting := make(chan []string, 1)
	go func() {
		var got []string
		for r, err := range h.Events(t.Context(), last) {
			got = append(got, r.Type, errString(err))
		}
		waiting <- got
	}()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-waiting:
		if len(got) != 0 {
			t.Errorf("a waiting stream yielded %q at Close", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stream waiting for more did not end when the host closed")
	}
	var got []string
	for r, err := range h.Events(t.Context(), 0) {
		got = append(got, r.Type, errString(err))
	}
	for r, err := range h.ThreadStream(t.Context(), threadID, 0) {
		got = append(got, r.Type, errString(err))
	}
	if len(got) != 0 {
		t.Errorf("streams of a closed host yielded %q", got)
	}
	_, err = h.Dispatch(t.Context(), domain.Command{ID: "late", Payload: domain.CreateThread{Provider: "acp", Cwd: e.ws}})
	refusals := []refusal{refused(err)}
	_, err = h.Dispatch(t.Context(), domain.Command{ID: "late", ThreadID: threadID, Payload: domain.DispatchMessage{Text: "hi"}})
	refusals = append(refusals, refused(err))
	_, err = h.Threads("", 0)
	refusals = append(refusals, refused(err))
	want := []refusal{{"closed", "host closed"}, {"closed", "host closed"}, {"other", "list threads: event log closed"}}
	if diff := cmp.Diff(want, refusals); diff != "" {
		t.Errorf("create, send, list on a closed host (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
