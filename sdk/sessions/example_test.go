package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/sessions"
)

// printer is the host: it prints each event it is given.
type printer struct{}

func (printer) Emit(ev sdk.RuntimeEvent) {
	fmt.Println(strings.Join(strings.Fields(fmt.Sprint(ev.Kind, " ", ev.TurnRef, " ", ev.ItemRef, ev.RequestRef, " ", sdk.StatusWord(ev.Status))), " "))
}

// A session's life: every event goes through the Lifecycle; one goroutine
// waits for the provider's exit and reports it, ending what was open;
// CloseSession stops the provider and waits for that report.
func ExampleLifecycle() {
	life := sessions.NewLifecycle(printer{})
	var pending sessions.Requests[string]
	exited := make(chan struct{}) // the provider process's end, in a plugin

	go func() { // the session's watch
		<-exited // and every frame the provider wrote handled
		life.Exit(errors.New("provider exited"), func(closed bool) ([]sdk.RuntimeEvent, sdk.RuntimeEvent) {
			var end []sdk.RuntimeEvent
			for _, ref := range pending.TakeAll() {
				end = append(end, sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, RequestRef: ref, Status: sdk.DecisionCancel})
			}
			status := sdk.ExitExited
			if closed {
				status = sdk.ExitClosed
			}
			return end, sdk.RuntimeEvent{Status: status}
		})
	}()

	// The provider asks the host something; the host closes the session
	// instead of answering.
	pending.Open("req-1", "req-1")
	life.Emit(sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, RequestRef: "req-1"})
	_ = life.Close(context.Background(), errors.New("session closed"), func() { close(exited) })
	life.Emit(sdk.RuntimeEvent{Kind: sdk.EventDiagnostic}) // too late: dropped
	// Output:
	// request_opened req-1
	// request_resolved req-1 cancel
	// runtime_exited closed
}

// A normalizer's items: started once, streamed into, and closed before
// their turn's terminal event.
func ExampleItems() {
	var items sessions.Items[struct{}]
	var host printer
	if it, started := items.Start("thread", "turn-1", "msg-1", sdk.ItemAssistantMessage, ""); started {
		host.Emit(it.Started())
		host.Emit(it.Delta("Hello"))
	}
	if _, started := items.Start("thread", "turn-1", "msg-1", sdk.ItemAssistantMessage, ""); !started {
		fmt.Println("msg-1 is open already")
	}
	for _, ev := range items.CloseTurn("thread", "turn-1", sdk.ItemFailed, "the turn ended") {
		host.Emit(ev)
	}
	host.Emit(sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, TurnRef: "turn-1", Status: sdk.TurnFailed})
	// Output:
	// item_started turn-1 msg-1 in_progress
	// content_delta turn-1 msg-1
	// msg-1 is open already
	// item_completed turn-1 msg-1 failed
	// turn_terminal turn-1 failed
}
