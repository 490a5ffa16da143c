// Command newplugin is a plugin built with the sdk of today (sdk/server),
// for the wire compatibility tests: an old host (testdata/v0/oldhost)
// reads it. A session's turn emits turn_started, a content delta and
// turn_terminal; CloseSession ends the stream with runtime_exited.
package main

import (
	"context"
	"os"
	"sync"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("newplugin")
	if err := server.Serve(&adapter{emit: map[string]sdk.Emitter{}}, server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}

type adapter struct {
	mu   sync.Mutex
	emit map[string]sdk.Emitter
}

func (a *adapter) Describe() sdk.Description {
	return sdk.Description{Name: "newplugin", Version: "1.2.3", WireProtocol: "none",
		Capabilities: sdk.Capabilities{Interrupt: true}, Notes: map[string]string{sdk.NoteInterrupt: "asks nicely"}}
}

func (a *adapter) OpenSession(_ context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	a.mu.Lock()
	a.emit[req.SessionID] = emit
	a.mu.Unlock()
	return sdk.OpenSessionResponse{ProviderSessionRef: "new-" + req.SessionID, ProviderThreadRef: "new-thread"}, nil
}

func (a *adapter) emitter(id string) (sdk.Emitter, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.emit[id]
	if !ok {
		return nil, sdk.Errorf(sdk.ErrUnknownSession, "session %s", id)
	}
	return e, nil
}

func (a *adapter) StartTurn(_ context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	e, err := a.emitter(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	e.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "new-thread", TurnRef: "t1", ClientTurnID: req.ClientTurnID})
	e.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: "t1", ItemRef: "m1", ItemKind: sdk.ItemAssistantMessage,
		Text: "you said: " + req.Input.Text})
	e.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "t1", Status: sdk.TurnCompleted,
		Usage: &sdk.Usage{InputTokens: 3, OutputTokens: 4}})
	return sdk.StartTurnResponse{TurnRef: "t1"}, nil
}

func (a *adapter) InterruptTurn(context.Context, sdk.InterruptTurnRequest) error { return nil }

func (a *adapter) CloseSession(_ context.Context, id string) error {
	e, err := a.emitter(id)
	if err != nil {
		return err
	}
	e.Emit(sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
	return nil
}
