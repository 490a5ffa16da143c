package acp

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock/clocktest"
)

// askAndWait is an agent, in sh, that answers initialize and session/new,
// asks permission when prompted, and then waits for its stdin to end.
const askAndWait = `read -r l; printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}'
read -r l; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}'
read -r l; printf '%s\n' '{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1","title":"Run ls"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}'
cat >/dev/null`

// emitted collects what the adapter emits.
type emitted chan sdk.RuntimeEvent

func (e emitted) Emit(ev sdk.RuntimeEvent) { e <- ev }

// until reads events up to one of kind.
func (e emitted) until(t *testing.T, kind sdk.EventKind) []sdk.RuntimeEvent {
	t.Helper()
	var got []sdk.RuntimeEvent
	for {
		select {
		case ev := <-e:
			got = append(got, ev)
			if ev.Kind == kind {
				return got
			}
		case <-time.After(clocktest.Guard):
			t.Fatalf("no %s within %v; got %+v", kind, clocktest.Guard, got)
		}
	}
}

// TestCloseWithPendingPermission: closing the session while the agent
// waits for a permission resolves the request cancelled and ends the turn,
// and runtime_exited (closed) comes after both, last.
func TestCloseWithPendingPermission(t *testing.T) {
	a := New(hclog.NewNullLogger())
	em := make(emitted, 256)
	if _, err := a.OpenSession(t.Context(), sdk.OpenSessionRequest{SessionID: "s", Cwd: t.TempDir(),
		Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", askAndWait}}}, em); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartTurn(t.Context(), sdk.StartTurnRequest{SessionID: "s", Input: sdk.TurnInput{Text: "ls"}}); err != nil {
		t.Fatal(err)
	}
	em.until(t, sdk.EventRequestOpened)
	if err := a.CloseSession(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	close(em) // CloseSession returned: the session emits nothing more
	var got []sdk.RuntimeEvent
	for ev := range em {
		// What the test names of each event: the turn's end and the
		// request's resolution race (each is a goroutine's).
		got = append(got, sdk.RuntimeEvent{Kind: ev.Kind, RequestRef: ev.RequestRef, Status: ev.Status, ThreadUsable: ev.ThreadUsable})
	}
	want := []sdk.RuntimeEvent{
		// The tool call the request names (never announced: it started
		// with the request) ends with the turn.
		{Kind: sdk.EventItemCompleted, Status: sdk.ItemFailed},
		{Kind: sdk.EventRequestResolved, RequestRef: "permission-7", Status: sdk.DecisionCancel},
		{Kind: sdk.EventTurnTerminal, Status: sdk.TurnFailed},
	}
	if len(got) == 0 || got[len(got)-1].Kind != sdk.EventRuntimeExited || got[len(got)-1].Status != sdk.ExitClosed {
		t.Fatalf("events after the close: %+v; want runtime_exited (closed) last", got)
	}
	byKind := cmpopts.SortSlices(func(a, b sdk.RuntimeEvent) bool { return a.Kind < b.Kind })
	if d := cmp.Diff(want, got[:len(got)-1], byKind, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("events before runtime_exited (-want +got):\n%s", d)
	}
}
