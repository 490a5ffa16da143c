package orchestrator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk"
)

// A host killed with SIGKILL in the middle of group commits and snapshot
// writes (a snapshot at every commit, and a cache of two threads, so that
// projections are written and loaded all the time) loses nothing it
// acknowledged: the next open finds every acknowledged receipt at its
// sequence, a gapless log, and every thread's projection (from its
// snapshot and the events after it, then reconciled) equal to the one its
// events rebuild. A snapshot that cannot be trusted is rebuilt from events.
// Three rounds on one data dir: each host continues what the killed one
// left.
func TestSIGKILLDuringGroupCommits(t *testing.T) {
	dir := t.TempDir()
	ws := t.TempDir()
	for round := range 3 {
		acked := crashRound(t, dir, ws, round)
		store, err := eventlog.Open(dir+"/events", nil)
		if err != nil {
			t.Fatalf("round %d: open the log after SIGKILL: %v", round, err)
		}
		for id, seq := range acked {
			b, ok, err := store.Receipt(id)
			var rc domain.Receipt
			if err != nil || !ok || json.Unmarshal(b, &rc) != nil || rc.Sequence != seq {
				t.Errorf("round %d: acknowledged command %s (sequence %d): receipt %s %v %v", round, id, seq, b, ok, err)
			}
		}
		all, err := store.After(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range all {
			if r.Sequence != uint64(i+1) {
				t.Fatalf("round %d: event %d has sequence %d", round, i+1, r.Sequence)
			}
		}
		if round == 1 {
			// Damage one thread's snapshot: a body that is not a thread.
			heads, _ := store.Heads("", 1)
			live, _ := store.LiveThreads()
			id := heads[0].ThreadID
			sn, _, err := store.ThreadSnapshot(id)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.PutThreadState(id, heads[0].Data, contains(live, id),
				&eventlog.Snapshot{Schema: sn.Schema, Seq: sn.Seq, Body: []byte(`{"id":"someone else"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		store.Close()

		var logged strings.Builder
		h, err := orchestrator.Open(orchestrator.Config{DataDir: dir, IDs: ids.Seeded(uint64(100 + round)),
			Logger: hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: &logged}, Level: hclog.Warn})})
		if err != nil {
			t.Fatalf("round %d: open the host after SIGKILL: %v", round, err)
		}
		threads, err := h.Threads("", 0)
		if err != nil || len(threads) != 4*(round+1) {
			t.Fatalf("round %d: %d threads listed, want %d (%v)", round, len(threads), 4*(round+1), err)
		}
		for _, s := range threads {
			got, err := h.Thread(s.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := rebuild(t, h, s.ID, got.Sequence) // queued runs may go on meanwhile
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				t.Fatalf("round %d: thread %s after the restart differs from its events\nloaded: %s\nevents: %s", round, s.ID, a, b)
			}
			// What was in flight is ended; runs it left queued wait for
			// the thread's next message (this host is not unattended):
			// the thread settles.
			if !settles(t, h, s.ID) {
				t.Errorf("round %d: thread %s is still in flight after recovery", round, s.ID)
			}
		}
		if round == 1 && !strings.Contains(logged.String(), "snapshot cannot be trusted") {
			t.Errorf("round %d: the damaged snapshot was used without a word:\n%s", round, logged.String())
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// settles says whether a thread is, or soon becomes, not in flight: no run
// active or queued, no session open.
func settles(t *testing.T, h *orchestrator.Host, id string) bool {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	th, seq, err := h.Snapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	if !th.Live() {
		return true
	}
	for range h.ThreadStream(ctx, id, seq) {
		if th, err := h.Thread(id); err == nil && !th.Live() {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// rebuild is a thread's projection from its stored events (up to a
// sequence, when one is given).
func rebuild(t *testing.T, h *orchestrator.Host, id string, upTo ...uint64) domain.Thread {
	t.Helper()
	recs, err := h.ThreadEvents(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var th domain.Thread
	for _, r := range recs {
		if len(upTo) > 0 && r.Sequence > upTo[0] {
			break
		}
		p, err := domain.DecodePayload(r.Type, r.Data)
		if err != nil {
			t.Fatal(err)
		}
		domain.Evolve(&th, domain.Event{Sequence: r.Sequence, ThreadID: r.ThreadID, At: r.At, Payload: p})
	}
	return th
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// crashRound runs the crash helper on the data dir and kills it with
// SIGKILL after a random number of acknowledged commands; it returns
// every command the helper acknowledged, with its receipt's sequence.
func crashRound(t *testing.T, dir, ws string, round int) map[string]uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATON_CRASH_HELPER="+dir, "BATON_CRASH_WS="+ws, "BATON_CRASH_ROUND="+strconv.Itoa(round))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killAt := 100 + rand.IntN(300)
	acked := map[string]uint64{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var id string
		var seq uint64
		if _, err := fmt.Sscanf(sc.Text(), "ack %s %d", &id, &seq); err != nil {
			t.Fatalf("helper said %q", sc.Text())
		}
		acked[id] = seq
		if len(acked) == killAt {
			cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	cmd.Wait()
	if len(acked) < killAt {
		t.Fatalf("round %d: the helper stopped after %d commands", round, len(acked))
	}
	return acked
}

// crashHelper is the process crashRound kills: a host on dir with four
// threads committing at once, a snapshot at every commit, printing each
// command it has committed. It never returns.
func crashHelper(dir string) int {
	ws := os.Getenv("BATON_CRASH_WS")
	round := os.Getenv("BATON_CRASH_ROUND")
	plugins, err := orchestrator.StubPlugins(filepath.Join(dir, "plugins"), "none")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		return 1
	}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: dir, PluginDirs: []string{plugins}, SnapshotBytes: 1, MaxThreads: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash helper:", err)
		return 1
	}
	var mu sync.Mutex
	ack := func(id string, rc domain.Receipt) {
		mu.Lock()
		fmt.Printf("ack %s %d\n", id, rc.Sequence)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Go(func() {
			ctx := context.Background()
			thread := fmt.Sprintf("r%s-k%d", round, k)
			n := 0
			send := func(p domain.CommandPayload) {
				n++
				id := fmt.Sprintf("%s-%d", thread, n)
				rc, err := h.Dispatch(ctx, domain.Command{ID: id, ThreadID: thread, Payload: p})
				if err == nil {
					ack(id, rc)
				}
			}
			ev := func(e sdk.RuntimeEvent) { send(domain.IngestProviderEvent{SessionID: "s1", Event: e}) }
			send(domain.CreateThread{Provider: "none", Cwd: ws, ProviderCommand: domain.ProviderCommand{Argv: []string{"x"}}})
			send(domain.RecordSessionOpened{SessionID: "s1", ThreadRef: "pt"})
			for turn := 0; ; turn++ {
				send(domain.DispatchMessage{Text: fmt.Sprintf("message %d", turn), Mode: domain.ModeQueueAfterActive})
				ref := fmt.Sprintf("u%d", turn)
				ev(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "pt", TurnRef: ref})
				for i := range 20 {
					ev(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: "a" + ref,
						ItemKind: sdk.ItemAssistantMessage, Text: fmt.Sprintf("delta %d ", i)})
				}
				ev(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref, Status: sdk.TurnCompleted})
			}
		})
	}
	wg.Wait()
	return 0
}
