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
//	hang METHOD       METHOD (OpenSession, StartTurn, SteerTurn,
//	                  InterruptTurn, RespondToRequest, RollbackThread,
//	                  CloseSession, or ForceCloseSession: CloseSession when
//	                  the host forces it) never returns; a turn answers,
//	                  but for SteerTurn, InterruptTurn and ForceCloseSession
//	                  it stays running, and for RespondToRequest it asks for
//	                  an approval first
//
// Installed as mute (baton-plugin-mute), it never answers the host's
// Describe, whatever the session's command. Every other call the host
// makes into a plugin is one of the methods above (its Events and
// AckEvents are the sdk's own).
//
// It is a test binary, not a first-party plugin: nothing installs it.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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
	if filepath.Base(os.Args[0]) == "baton-plugin-mute" && answeringTheHost() {
		select {} // never returns
	}
	return sdk.Description{Name: "crashplugin", Version: "0.0.1", WireProtocol: "none",
		Capabilities: sdk.Capabilities{Interrupt: true, NativeSteering: true, Approvals: true, NativeRollback: true}}
}

// answeringTheHost says whether Describe answers the host's call (the
// plugin's Describe RPC), not Serve's own check of the adapter as it
// starts, which must answer for the plugin to start at all.
func answeringTheHost() bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "server.(*server).Describe") {
			return true
		}
		if !more {
			return false
		}
	}
}

// hang never returns if the session's mode is to hang in method.
func (s *session) hang(method string) {
	if s.mode == "hang" && s.arg == method {
		select {} // never returns
	}
}

func (a *adapter) OpenSession(_ context.Context, req sdk.OpenSessionRequest, emit sdk.Emitter) (sdk.OpenSessionResponse, error) {
	argv := append(req.Command.Argv, "", "")
	s := &session{mode: argv[0], arg: argv[1], emit: emit}
	s.hang("OpenSession")
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
	s.hang("StartTurn")
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
		switch s.arg {
		case "SteerTurn", "InterruptTurn", "ForceCloseSession":
			// The turn stays running: only a steer, an interrupt or the
			// session's end could end it.
		case "RespondToRequest":
			s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, TurnRef: ref, RequestRef: ref + "-ask",
				RequestKind: sdk.RequestCommandApproval, Title: "rm -rf build"})
		default:
			finish("ok")
		}
	default:
		finish("ok")
	}
	return sdk.StartTurnResponse{TurnRef: ref}, nil
}

func (a *adapter) SteerTurn(_ context.Context, req sdk.SteerTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	s.hang("SteerTurn")
	item := req.TurnRef + "-answer"
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventContentDelta, TurnRef: req.TurnRef, ItemRef: item, ItemKind: sdk.ItemAssistantMessage, Text: req.Input.Text})
	return nil
}

func (a *adapter) InterruptTurn(_ context.Context, req sdk.InterruptTurnRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	s.hang("InterruptTurn")
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: req.TurnRef, Status: sdk.TurnInterrupted})
	return nil
}

func (a *adapter) RespondToRequest(_ context.Context, req sdk.RespondToRequestRequest) error {
	s, err := a.session(req.SessionID)
	if err != nil {
		return err
	}
	s.hang("RespondToRequest")
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: req.RequestRef, Status: req.Decision})
	return nil
}

func (a *adapter) RollbackThread(_ context.Context, req sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error) {
	s, err := a.session(req.SessionID)
	if err != nil {
		return sdk.RollbackThreadResponse{}, err
	}
	s.hang("RollbackThread")
	return sdk.RollbackThreadResponse{ThreadRef: req.ThreadRef}, nil
}

func (a *adapter) CloseSession(ctx context.Context, id string) error {
	s, err := a.session(id)
	if err != nil {
		return err
	}
	s.hang("CloseSession")
	if sdk.ForceClosing(ctx) {
		s.hang("ForceCloseSession")
	}
	a.mu.Lock()
	delete(a.sessions, id)
	a.mu.Unlock()
	s.emit.Emit(sdk.RuntimeEvent{Kind: sdk.EventRuntimeExited, Status: sdk.ExitClosed})
	return nil
}
