package claude

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

func TestMain(m *testing.M) { plugintest.Main(m) }

// events collects what the adapter emits.
type events chan sdk.RuntimeEvent

func (e events) Emit(ev sdk.RuntimeEvent) { e <- ev }

// ids runs the simple transcript through the adapter in this process, the
// replay peer as claude, with its ids drawn from seed, and returns the ids
// it sent: the turn's ref and the ids in its outbound frames.
func ids(t *testing.T, seed byte) []string {
	t.Helper()
	var key [32]byte
	key[0] = seed
	a := New(hclog.NewNullLogger(), WithRandom(rand.NewChaCha8(key)))
	ws, frames := t.TempDir(), filepath.Join(t.TempDir(), "frames.ndjson")
	em := make(events, 1024)
	ctx := t.Context()
	if _, err := a.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: "s", Cwd: ws, RawFrameLog: frames,
		Command: plugintest.PeerCommand("../../../../testdata/claude/simple.ndjson", ws, "")}, em); err != nil {
		t.Fatal(err)
	}
	r, err := a.StartTurn(ctx, sdk.StartTurnRequest{SessionID: "s", Input: sdk.TurnInput{Text: "Say hello"}})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range em {
		if ev.Kind == sdk.EventTurnTerminal {
			break
		}
	}
	if err := a.CloseSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(frames)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{r.TurnRef}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var f struct {
			Dir   string
			Frame struct {
				RequestID string `json:"request_id"`
				UUID      string
			}
		}
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatalf("frame log line %s: %v", line, err)
		}
		if f.Dir == "out" {
			got = append(got, cmp.Or(f.Frame.RequestID, f.Frame.UUID))
		}
	}
	return got
}

// The adapter's ids come from its random source: seeded, they are the
// same on every run (the initialize request's id, then the turn's user
// message uuid, which is the turn's ref), and another seed gives others.
func TestIDsFromASeededSource(t *testing.T) {
	const uuid1 = "4fbde91b-6eb8-4b73-a48e-d247dbe5882e"
	want := []string{uuid1, "req_1_6ae6783f", uuid1}
	got := ids(t, 1)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("ids of seed 1 (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(got, ids(t, 1)); diff != "" {
		t.Errorf("ids of seed 1, again (-first +second):\n%s", diff)
	}
	if other := ids(t, 2); other[0] == got[0] || other[1] == got[1] {
		t.Errorf("seed 2 gave ids of seed 1: %v", other)
	}
}
