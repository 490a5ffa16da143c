// Command crashplugin is a provider plugin for the host's tests of
// plugins that fail: it crashes mid-turn, or never answers a call, on cue.
// It runs no provider process; a session's provider command says what it
// does:
//
//	answer            every turn answers "ok" and completes
//	crash FIFO        a turn says "working" and waits for FIFO to be
//	                  written, then the plugin panics (while FIFO does not
//	                  exist, turns answer)
//	crash-start       StartTurn panics
//	gate FIFO         a turn says "working" and waits for FIFO to be
//	                  written, then completes
//	hang METHOD       METHOD (StartTurn, InterruptTurn or CloseSession)
//	                  never returns; a turn answers, but for InterruptTurn
//	                  stays running
//
// It is a test binary, not a first-party plugin: nothing installs it.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("crashplugin")
	if err := server.Serve(&adapter{log: log, sessions: map[string]*session{}}, server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}

type adapter struct {
	log      hclog.Logger
	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	mode, arg string
	emit      sdk.Emitter
	turns     int
}

func (a *adapter) Describe() sdk.Description {
	return sdk.Description{Name: "crashplugin", Version: "0.0.1", WireProtocol: "none",
		Capabilities: sdk.Capabilities{Interrupt: true}}
}

func (a *adapter) OpenSession(_ context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	argv := append(req.Command.Argv, "", "")
	s := &session{mode: argv[0], arg: argv[1], emit: emit}
	a.mu.Lock()
	a.sessions[req.SessionID] = s
	a.mu.Unlock()
	emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventThreadStarted, ThreadRef: "thread-" + req.SessionID})
	return sdk.OpenSessionResponse{ProviderSessionRef: req.SessionID, ProviderThreadRef: "thread-" + req.SessionID}, nil
}

func (a *adapter) session(id string) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok {
		return nil, sdk.Errorf(sdk.ErrUnknownSession, "session %s", id)
	}
	return s, nil
}

func (a *adapter) StartTurn(_ context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.StartTurnResponse{}, err
	}
	if s.mode == "hang" && s.arg == "StartTurn" {
		select {} // never returns
	}
	if s.mode == "crash-start" {
		a.log.Warn("about to fall over")
		panic("crashplugin: StartTurn fell over")
	}
	a.mu.Lock()
	s.turns++
	ref := fmt.Sprintf("%s-turn-%d", req.SessionID, s.turns)
	a.mu.Unlock()
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnStarted, ThreadRef: "thread-" + req.SessionID, TurnRef: ref, ClientTurnID: req.ClientTurnID})
	item := ref + "-answer"
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventItemStarted, TurnRef: ref, ItemRef: item, ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemInProgress})
	finish := func(text string) {
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: item, ItemKind: sdk.ItemAssistantMessage, Text: text})
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, TurnRef: ref, ItemRef: item, ItemKind: sdk.ItemAssistantMessage, Status: sdk.ItemDone})
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: ref, Status: sdk.TurnCompleted})
	}
	switch s.mode {
	case "crash", "gate":
		if _, err := os.Stat(s.arg); err != nil {
			finish("ok")
			break
		}
		s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: ref, ItemRef: item, ItemKind: sdk.ItemAssistantMessage, Text: "working"})
		go func() {
			if _, err := os.ReadFile(s.arg); err != nil { // blocks until the test writes it
				fmt.Fprintln(os.Stderr, "crashplugin: read the cue:", err)
			}
			if s.mode == "crash" {
				a.log.Warn("about to fall over")
				panic("crashplugin: the provider fell over mid-turn")
			}
			finish(", done")
		}()
	case "hang":
		if s.arg != "InterruptTurn" {
			finish("ok")
		}
		// Else the turn stays running: only an interrupt could end it.
	default:
		finish("ok")
	}
	return sdk.StartTurnResponse{TurnRef: ref}, nil
}

func (a *adapter) InterruptTurn(_ context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	if s.mode == "hang" && s.arg == "InterruptTurn" {
		select {} // never returns
	}
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: req.TurnRef, Status: sdk.TurnInterrupted})
	return nil
}

func (a *adapter) CloseSession(_ context.Context, id string) error {
	s, err := a.session(id)
	if err != nil {
		return err
	}
	if s.mode == "hang" && s.arg == "CloseSession" {
		select {} // never returns
	}
	a.mu.Lock()
	delete(a.sessions, id)
	a.mu.Unlock()
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
	return nil
}
