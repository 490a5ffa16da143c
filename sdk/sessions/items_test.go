package sessions

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/baton-run/baton/sdk"
)

func TestItems(t *testing.T) {
	var items Items[int] // the zero value is ready
	if items.Get("th", "a") != nil || items.Find("a") != nil {
		t.Fatal("an empty table has an item")
	}
	a, started := items.Start("th", "t1", "a", sdk.ItemCommandExecution, "ls")
	if !started {
		t.Fatal("a new item was not started")
	}
	a.Data = 7
	again, started := items.Start("th", "t2", "a", sdk.ItemToolCall, "other")
	if started || again != a {
		t.Fatalf("an open item started again: %+v", again)
	}
	b, _ := items.Start("th", "", "b", sdk.ItemAssistantMessage, "")  // a provider that named no turn
	c, _ := items.Start("th", "t2", "c", sdk.ItemReasoning, "")       // another turn
	d, _ := items.Start("child", "t1", "d", sdk.ItemToolCall, "grep") // another thread
	if items.Get("th", "a").Data != 7 || items.Get("child", "a") != nil || items.Find("d") != d {
		t.Fatal("the items are not found by thread and ref")
	}
	want := []sdk.RuntimeEvent{
		{Kind: sdk.EventItemStarted, ThreadRef: "th", TurnRef: "t1", ItemRef: "a", ItemKind: sdk.ItemCommandExecution,
			Title: "ls", Status: sdk.ItemInProgress},
		{Kind: sdk.EventContentDelta, ThreadRef: "th", TurnRef: "t1", ItemRef: "a", ItemKind: sdk.ItemCommandExecution, Text: "out"},
		{Kind: sdk.EventItemUpdated, ThreadRef: "th", TurnRef: "t2", ItemRef: "c", ItemKind: sdk.ItemReasoning},
	}
	got := []sdk.RuntimeEvent{a.Started(), a.Delta("out"), c.Event(sdk.EventItemUpdated)}
	a.Delta("put")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if a.Streamed.String() != "output" {
		t.Errorf("streamed %q; want what the deltas carried", a.Streamed.String())
	}
	// Turn t1 of th ends: its item and the one of no turn close, in ref
	// order; the other turn's and the other thread's stay open.
	want = []sdk.RuntimeEvent{
		{Kind: sdk.EventItemCompleted, ThreadRef: "th", TurnRef: "t1", ItemRef: "a", ItemKind: sdk.ItemCommandExecution,
			Title: "ls", Status: sdk.ItemFailed, Text: "still open"},
		{Kind: sdk.EventItemCompleted, ThreadRef: "th", TurnRef: "t1", ItemRef: "b", ItemKind: sdk.ItemAssistantMessage,
			Status: sdk.ItemFailed, Text: "still open"},
	}
	if d := cmp.Diff(want, items.CloseTurn("th", "t1", sdk.ItemFailed, "still open")); d != "" {
		t.Errorf("closing turn t1 (-want +got):\n%s", d)
	}
	if b.Turn != "t1" || items.Get("th", "b") != nil {
		t.Errorf("the item of no turn was not closed with t1")
	}
	if d := cmp.Diff([]string{"child\x00d", "th\x00c"}, sortedKeys(items)); d != "" {
		t.Errorf("open after t1 ended (-want +got):\n%s", d)
	}
	done := items.Complete(c, sdk.ItemDone)
	if d := cmp.Diff(sdk.RuntimeEvent{Kind: sdk.EventItemCompleted, ThreadRef: "th", TurnRef: "t2", ItemRef: "c",
		ItemKind: sdk.ItemReasoning, Status: sdk.ItemDone}, done); d != "" {
		t.Errorf("completed (-want +got):\n%s", d)
	}
	items.Forget(d)
	if len(items) != 0 {
		t.Errorf("open items left: %v", sortedKeys(items))
	}
}

func sortedKeys[X any](s Items[X]) []string {
	var ks []string
	for k := range s {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestEveryItemCompletesOnce starts, completes and ends turns at random:
// every item started is completed exactly once, within its turn, and the
// events of an item are started before completed.
func TestEveryItemCompletesOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var items Items[struct{}]
		threads, turns, refs := []string{"a", "b"}, []string{"", "t1", "t2"}, []string{"x", "y", "z"}
		var evs []sdk.RuntimeEvent
		for i := range rapid.IntRange(0, 40).Draw(t, "ops") {
			th := rapid.SampledFrom(threads).Draw(t, fmt.Sprint("thread ", i))
			turn := rapid.SampledFrom(turns).Draw(t, fmt.Sprint("turn ", i))
			ref := rapid.SampledFrom(refs).Draw(t, fmt.Sprint("ref ", i))
			switch rapid.IntRange(0, 2).Draw(t, fmt.Sprint("op ", i)) {
			case 0:
				if it, ok := items.Start(th, turn, ref, sdk.ItemToolCall, ""); ok {
					evs = append(evs, it.Started())
				}
			case 1:
				if it := items.Get(th, ref); it != nil {
					evs = append(evs, items.Complete(it, sdk.ItemDone))
				}
			case 2:
				if turn != "" {
					evs = append(evs, items.CloseTurn(th, turn, sdk.ItemFailed, "")...)
					evs = append(evs, sdk.RuntimeEvent{Kind: sdk.EventTurnTerminal, ThreadRef: th, TurnRef: turn})
				}
			}
		}
		for _, th := range threads {
			for _, turn := range turns[1:] {
				evs = append(evs, items.CloseTurn(th, turn, sdk.ItemFailed, "")...)
			}
		}
		if len(items) != 0 {
			t.Fatalf("items left open after every turn ended: %v", sortedKeys(items))
		}
		open := map[string]string{} // item -> its turn ("" until it has one)
		for _, ev := range evs {
			k := itemKey(ev.ThreadRef, ev.ItemRef)
			switch ev.Kind {
			case sdk.EventItemStarted:
				if _, ok := open[k]; ok {
					t.Fatalf("%s started twice", k)
				}
				open[k] = ev.TurnRef
			case sdk.EventItemCompleted:
				turn, ok := open[k]
				if !ok {
					t.Fatalf("%s completed without being open", k)
				}
				if turn != "" && turn != ev.TurnRef {
					t.Fatalf("%s of turn %s completed in turn %s", k, turn, ev.TurnRef)
				}
				delete(open, k)
			case sdk.EventTurnTerminal:
				for k, turn := range open {
					if th := k[:1]; th == ev.ThreadRef && (turn == ev.TurnRef || turn == "") {
						t.Fatalf("%s still open when its turn %s ended", k, ev.TurnRef)
					}
				}
			}
		}
	})
}
