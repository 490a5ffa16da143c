// Package scenario drives a thread through a scripted sequence of client
// actions: send a message (in a dispatch mode), wait for the run to reach a
// point, interrupt it, answer a request. The same script drives a real
// provider when a transcript is recorded and the replay peer when the
// transcript is tested, so both see the same client behaviour.
//
// A script is JSON:
//
//	{"approve":"ask","steps":[
//	  {"send":"Write a long story"},
//	  {"waitFor":"running"},
//	  {"send":"Make it short","mode":"steer_active"},
//	  {"waitFor":"ended"}]}
//
// {"rollback": N} rolls the thread back to run N's checkpoint (0: the
// baseline before the first run) and waits for the rollback to finish.
//
// Waits are event-driven: "running" (the newest run's provider turn has
// started), "text" (the newest run has assistant text), "item" (the
// newest run has a turn item: a tool call, a command, a file change...),
// "request" (a request is pending and unanswered), "ended" (every run has
// ended). A
// wait is also over when what it waits for can no longer happen (the run
// ended), so a script never hangs on a run that failed.
package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/sdk/clock"
)

// Script is a scenario's client side.
type Script struct {
	// Approve is the new thread's approval policy (default "decline").
	Approve string `json:"approve,omitempty"`
	Steps   []Step `json:"steps"`
}

// Step is one client action; exactly one of its action fields is set.
type Step struct {
	Send string `json:"send,omitempty"`
	// Mode is the dispatch mode of Send; empty queues it as a run of its
	// own (what a user typing several messages means).
	Mode      string `json:"mode,omitempty"`
	WaitFor   string `json:"waitFor,omitempty"`
	Interrupt bool   `json:"interrupt,omitempty"`
	// Respond answers the oldest pending request with this decision.
	Respond string            `json:"respond,omitempty"`
	Answers map[string]string `json:"answers,omitempty"`
	// SleepMS pauses, on the host's clock, for a real provider to get
	// somewhere; replays skip it (Options.Sleep false).
	SleepMS int `json:"sleepMs,omitempty"`
	// Rollback rolls back to this run's checkpoint (0: the baseline).
	Rollback *int `json:"rollback,omitempty"`
}

// Waits.
const (
	WaitRunning = "running"
	WaitText    = "text"
	WaitItem    = "item"
	WaitRequest = "request"
	WaitEnded   = "ended"
)

// Parse reads a script; errors name the step that is wrong.
func Parse(b []byte) (Script, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Script{}, fmt.Errorf("scenario script: %w", err)
	}
	if len(s.Steps) == 0 {
		return Script{}, errors.New("scenario script: no steps")
	}
	for i, st := range s.Steps {
		n := 0
		for _, set := range []bool{st.Send != "", st.WaitFor != "", st.Interrupt, st.Respond != "", st.SleepMS > 0, st.Rollback != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return Script{}, fmt.Errorf("scenario script: step %d must do exactly one thing (send, waitFor, interrupt, respond, sleepMs or rollback)", i+1)
		}
		switch st.WaitFor {
		case "", WaitRunning, WaitText, WaitItem, WaitRequest, WaitEnded:
		default:
			return Script{}, fmt.Errorf("scenario script: step %d: unknown wait %q", i+1, st.WaitFor)
		}
		// A message the host would refuse is refused before the script
		// starts (and its thread is made).
		if problem := domain.CheckText(st.Send); st.Send != "" && problem != "" {
			return Script{}, fmt.Errorf("scenario script: step %d: the message %s", i+1, problem)
		}
	}
	return s, nil
}

// Load reads a script file.
func Load(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, err
	}
	s, err := Parse(b)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Messages are the texts the script sends, in order.
func (s Script) Messages() []string {
	var out []string
	for _, st := range s.Steps {
		if st.Send != "" {
			out = append(out, st.Send)
		}
	}
	return out
}

// Options tune a run of a script.
type Options struct {
	// Sleep honours sleepMs steps (recording against a real provider).
	Sleep bool
	// CommandPrefix makes command ids unique per script run.
	CommandPrefix string
}

// Driver is what a script acts on a thread through: a host (see Host), or
// a client of the host's service. Its errors are what the script reports.
type Driver interface {
	// Send dispatches a message in a mode ("" lets the host choose).
	Send(ctx context.Context, threadID, cmdID, text string, mode domain.DispatchMode) error
	// Interrupt interrupts a run; nil if the run ended first (nothing to
	// interrupt).
	Interrupt(ctx context.Context, threadID, cmdID, runID string) error
	// Respond answers a request.
	Respond(ctx context.Context, threadID, cmdID, requestID string, decision domain.RequestDecision, answers map[string]string) error
	// Rollback starts rolling the thread back to run N's checkpoint (0:
	// the baseline before the first run).
	Rollback(ctx context.Context, threadID, cmdID string, run int) error
	// Thread is the thread's projection now.
	Thread(ctx context.Context, threadID string) (domain.Thread, error)
	// Wait returns the thread once ok holds for it, reading it again after
	// each of its events.
	Wait(ctx context.Context, threadID string, ok func(domain.Thread) bool) (domain.Thread, error)
	// Clock is the clock sleepMs pauses on.
	Clock() clock.Clock
}

// Run performs the script's steps on a thread, then waits for every run
// to end.
func Run(ctx context.Context, d Driver, threadID string, s Script, o Options) error {
	for i, st := range s.Steps {
		id := o.CommandPrefix + "step-" + strconv.Itoa(i+1)
		var err error
		switch {
		case st.Send != "":
			mode := domain.DispatchMode(st.Mode)
			if mode == "" {
				mode = domain.ModeQueueAfterActive
			} else if mode == "auto" {
				mode = ""
			}
			err = d.Send(ctx, threadID, id, st.Send, mode)
		case st.WaitFor != "":
			err = Wait(ctx, d, threadID, st.WaitFor)
		case st.Interrupt:
			var t domain.Thread
			if t, err = d.Thread(ctx, threadID); err == nil {
				r := newest(t)
				if r == nil {
					return fmt.Errorf("step %d: no run to interrupt", i+1)
				}
				err = d.Interrupt(ctx, threadID, id, r.ID)
			}
		case st.Respond != "":
			var t domain.Thread
			if t, err = d.Thread(ctx, threadID); err == nil {
				q := pending(t)
				if q == nil {
					return fmt.Errorf("step %d: no pending request to answer", i+1)
				}
				err = d.Respond(ctx, threadID, id, q.ID, domain.RequestDecision(st.Respond), st.Answers)
			}
		case st.Rollback != nil:
			var rb domain.Rollback
			if rb, err = RollbackToRun(ctx, d, threadID, id, *st.Rollback); err == nil && rb.Status != domain.RollbackDone {
				err = fmt.Errorf("rollback to run %d %s: %s", *st.Rollback, rb.Status, rb.Failure.Message)
			}
		case st.SleepMS > 0 && o.Sleep:
			err = clock.Sleep(ctx, d.Clock(), time.Duration(st.SleepMS)*time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return Wait(ctx, d, threadID, WaitEnded)
}

// Wait waits until the thread reaches a point (see the Wait constants).
func Wait(ctx context.Context, d Driver, threadID, what string) error {
	if _, err := d.Wait(ctx, threadID, func(t domain.Thread) bool { return Reached(t, what) }); err != nil {
		return fmt.Errorf("waiting for %q: %w", what, err)
	}
	return nil
}

// Reached says whether a thread is at a point.
func Reached(t domain.Thread, what string) bool {
	r := newest(t)
	switch what {
	case WaitRunning:
		return r != nil && (r.Status == domain.RunStatusRunning || r.Status == domain.RunStatusWaiting || r.Status.Terminal())
	case WaitText:
		for _, m := range t.Messages {
			if r != nil && m.RunID == r.ID && m.Role == domain.RoleAssistant && m.Text.Len() > 0 {
				return true
			}
		}
		return r != nil && r.Status.Terminal()
	case WaitItem:
		for _, it := range t.TurnItems {
			if r != nil && it.RunID == r.ID {
				return true
			}
		}
		return r != nil && r.Status.Terminal()
	case WaitRequest:
		// Nothing more can come once every run has ended.
		return pending(t) != nil || Reached(t, WaitEnded)
	default: // WaitEnded: every run, and any rollback
		for _, r := range t.Runs {
			if !r.Status.Terminal() {
				return false
			}
		}
		return !t.RollingBack()
	}
}

// RunsEnded is a wait's condition: the thread has at least n runs, and
// every one has ended.
func RunsEnded(n int) func(domain.Thread) bool {
	return func(t domain.Thread) bool {
		if t.RunCount() < n { // those that left the projection have ended
			return false
		}
		for _, r := range t.Runs {
			if !r.Status.Terminal() {
				return false
			}
		}
		return true
	}
}

// RollbackToRun rolls a thread back to run N's checkpoint (0: the baseline
// before the first run) with command id cmdID, and waits until the rollback
// has finished, one way or the other.
func RollbackToRun(ctx context.Context, d Driver, threadID, cmdID string, run int) (domain.Rollback, error) {
	if err := d.Rollback(ctx, threadID, cmdID, run); err != nil {
		return domain.Rollback{}, err
	}
	t, err := d.Wait(ctx, threadID, func(t domain.Thread) bool { return !t.RollingBack() })
	if err != nil {
		return domain.Rollback{}, fmt.Errorf("waiting for the rollback: %w", err)
	}
	if len(t.Rollbacks) == 0 {
		return domain.Rollback{}, errors.New("no rollback recorded")
	}
	return t.Rollbacks[len(t.Rollbacks)-1], nil
}

func newest(t domain.Thread) *domain.Run {
	for i := len(t.Runs) - 1; i >= 0; i-- {
		if t.Runs[i].Status != domain.RunStatusQueued {
			return &t.Runs[i]
		}
	}
	return nil
}

func pending(t domain.Thread) *domain.RuntimeRequest {
	for i := range t.Requests {
		if q := &t.Requests[i]; q.Status == domain.RequestStatusPending && q.AnsweredBy == "" && q.Delivery == domain.DeliveryLive {
			return q
		}
	}
	return nil
}
