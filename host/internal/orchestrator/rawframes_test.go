package orchestrator_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/rawframes"
	"github.com/baton-run/baton/sdk/clock"
)

const day = 24 * time.Hour

// frameFile writes a raw-frame log of size bytes last written at mtime.
func (e *env) frameFile(name string, size int, mtime time.Time, mode os.FileMode) {
	e.t.Helper()
	p := filepath.Join(e.data, "rawframes", name)
	if err := os.WriteFile(p, []byte(strings.Repeat("x", size)), mode); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		e.t.Fatal(err)
	}
}

// frameFiles is what DATA/rawframes holds: each name and its mode.
func (e *env) frameFiles() map[string]os.FileMode {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.data, "rawframes"))
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]os.FileMode{}
	for _, ent := range ents {
		fi, err := ent.Info()
		if err != nil {
			e.t.Fatal(err)
		}
		out[ent.Name()] = fi.Mode()
	}
	return out
}

// waitPruneTimer waits until the host's next retention pass is pending in
// d: the pass before it is done.
func (e *env) waitPruneTimer(d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), hangGuard)
	defer cancel()
	if _, err := e.clock.WaitPending(ctx, func(p []time.Duration) bool { return slices.Contains(p, d) }); err != nil {
		e.t.Fatalf("no retention pass pending in %v: %v (pending %v; files %v)", d, err, e.clock.Pending(), e.frameFiles())
	}
}

// Opening the host prunes the raw-frame logs: those of age first, then the
// oldest until the rest fit the size bound; files that are no log are left
// alone; the directory and the logs kept are made private. Later logs go
// as they come of age, on the host's clock.
func TestRawFramesPrunedAtOpenAndAsTheyComeOfAge(t *testing.T) {
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch),
		frames: rawframes.Policy{MaxBytes: 1000, MaxAge: 10 * day}}
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	if err := os.MkdirAll(filepath.Join(e.data, "rawframes"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.frameFile("ses_a.ndjson.1", 300, epoch.Add(-12*day), 0o600)
	e.frameFile("ses_a.ndjson", 100, epoch.Add(-11*day), 0o600)
	e.frameFile("ses_b.ndjson", 400, epoch.Add(-5*day), 0o600)
	e.frameFile("ses_c.ndjson", 400, epoch.Add(-3*day), 0o644)
	e.frameFile("ses_d.ndjson", 300, epoch.Add(-1*day), 0o600)
	e.frameFile("notes.txt", 5000, epoch.Add(-30*day), 0o644)
	e.open()
	want := map[string]os.FileMode{"ses_c.ndjson": 0o600, "ses_d.ndjson": 0o600, "notes.txt": 0o644}
	if diff := cmp.Diff(want, e.frameFiles()); diff != "" {
		t.Fatalf("raw-frame logs after open (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(filepath.Join(e.data, "rawframes"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("rawframes dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
	e.waitPruneTimer(7 * day) // ses_c comes of age
	e.clock.Advance(7*day - time.Nanosecond)
	if diff := cmp.Diff(want, e.frameFiles()); diff != "" {
		t.Fatalf("raw-frame logs before ses_c came of age (-want +got):\n%s", diff)
	}
	e.clock.Advance(time.Nanosecond)
	e.waitPruneTimer(2 * day) // then ses_d
	if diff := cmp.Diff(map[string]os.FileMode{"ses_d.ndjson": 0o600, "notes.txt": 0o644}, e.frameFiles()); diff != "" {
		t.Fatalf("raw-frame logs once ses_c came of age (-want +got):\n%s", diff)
	}
}

// The logs of a session that is open are never pruned, however old and
// large: the closed sessions' go first; once the session is closed, its
// logs go too.
func TestRawFramesOfAnOpenSessionAreKept(t *testing.T) {
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch),
		frames: rawframes.Policy{MaxBytes: 64 << 10, MaxAge: 10 * day}}
	t.Cleanup(func() {
		if e.host != nil {
			e.host.Close()
		}
	})
	if err := os.MkdirAll(filepath.Join(e.data, "rawframes"), 0o700); err != nil {
		t.Fatal(err)
	}
	e.frameFile("ses_trigger.ndjson", 10, epoch.Add(-9*day), 0o600) // comes of age in a day
	e.open()
	threadID := e.createThread("acp", "acp/simple.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	session := th.ProviderSessions[0].ID + ".ndjson"
	if th.ProviderSessions[0].Status != domain.SessionStatusOpen {
		t.Fatalf("the session is not open: %+v", th.ProviderSessions[0])
	}
	// The open session's log is the oldest of all, past the age bound, and
	// with the others over the size bound.
	p := filepath.Join(e.data, "rawframes", session)
	fi, err := os.Stat(p)
	if err != nil || fi.Size() == 0 || fi.Size() > 30<<10 {
		t.Fatalf("the session's raw-frame log: %v, %v; want one of some bytes, under 30 KiB", fi, err)
	}
	if err := os.Chtimes(p, epoch.Add(-20*day), epoch.Add(-20*day)); err != nil {
		t.Fatal(err)
	}
	e.frameFile("ses_x.ndjson", 40000, epoch.Add(-2*day), 0o600)
	e.frameFile("ses_y.ndjson", 30000, epoch.Add(-1*day), 0o600)
	e.frameFile("ses_later.ndjson", 10, epoch.Add(5*day), 0o600)
	e.waitPruneTimer(day)
	e.clock.Advance(day)
	e.waitPruneTimer(8 * day) // ses_y comes of age next
	want := map[string]os.FileMode{session: 0o600, "ses_y.ndjson": 0o600, "ses_later.ndjson": 0o600}
	if diff := cmp.Diff(want, e.frameFiles()); diff != "" {
		t.Fatalf("raw-frame logs with the session open (-want +got):\n%s", diff)
	}
	e.restart() // the session closes; the next host prunes its log
	want = map[string]os.FileMode{"ses_y.ndjson": 0o600, "ses_later.ndjson": 0o600}
	if diff := cmp.Diff(want, e.frameFiles()); diff != "" {
		t.Fatalf("raw-frame logs once the session closed (-want +got):\n%s", diff)
	}
}

// With raw frames off, the plugin is given no log: nothing is written,
// and the run goes as with them.
func TestRawFramesOff(t *testing.T) {
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), frames: rawframes.Policy{Off: true}}
	e.open()
	t.Cleanup(func() { e.host.Close() })
	threadID := e.createThread("acp", "acp/simple.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	if r := th.Runs[0]; r.Status != domain.RunStatusCompleted || assistantText(th, r.ID) != assistantTexts(t, "acp/simple.ndjson")[0] {
		t.Fatalf("run %s: %+v; text %q", r.Status, r.Failure, assistantText(th, r.ID))
	}
	if diff := cmp.Diff(map[string]os.FileMode{}, e.frameFiles()); diff != "" {
		t.Errorf("raw-frame logs with raw frames off (-want +got):\n%s", diff)
	}
}

// listFrames is what DATA/rawframes holds (nil if it cannot be read).
func listFrames(data string) map[string]os.FileMode {
	ents, err := os.ReadDir(filepath.Join(data, "rawframes"))
	if err != nil {
		return nil
	}
	out := map[string]os.FileMode{}
	for _, ent := range ents {
		if fi, err := ent.Info(); err == nil {
			out[ent.Name()] = fi.Mode()
		}
	}
	return out
}

// A session's log is pruned as soon as its session ends (here, closed
// idle), not only at the next host's start.
func TestRawFramesPrunedAsASessionEnds(t *testing.T) {
	const idle = time.Hour
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), seed: 1, clock: clock.NewFake(epoch), idle: idle,
		frames: rawframes.Policy{MaxBytes: -1, MaxAge: 10 * day}}
	t.Cleanup(func() { e.host.Close() })
	if err := os.MkdirAll(filepath.Join(e.data, "rawframes"), 0o700); err != nil {
		t.Fatal(err)
	}
	e.frameFile("ses_young.ndjson", 10, time.Now().Add(day), 0o600) // kept: a pass arms its timer
	e.open()
	threadID := e.createThread("acp", "acp/simple.ndjson")
	e.dispatch(domain.Command{ID: "send", ThreadID: threadID, Payload: domain.DispatchMessage{Text: messages(t, "acp/simple.messages")[0]}})
	th := e.waitFor(threadID, "the run to end", allRunsEnded(1))
	session := th.ProviderSessions[0].ID + ".ndjson"
	if err := os.Chtimes(filepath.Join(e.data, "rawframes", session), epoch.Add(-20*day), epoch.Add(-20*day)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if _, err := e.clock.WaitPending(ctx, func(p []time.Duration) bool { return slices.Contains(p, idle) }); err != nil {
		t.Fatalf("no idle timer: %v", err)
	}
	e.clock.Advance(idle)
	e.waitFor(threadID, "the idle session to close", func(th domain.Thread) bool {
		return th.ProviderSessions[0].Status == domain.SessionStatusEnded
	})
	// The pass the session's end asks for arms the next one again: the
	// files are looked at as the timers change.
	want := map[string]os.FileMode{"ses_young.ndjson": 0o600}
	if _, err := e.clock.WaitPending(ctx, func([]time.Duration) bool { return cmp.Equal(want, listFrames(e.data)) }); err != nil {
		t.Fatalf("the ended session's log was not pruned: %v; files %v", err, listFrames(e.data))
	}
}
