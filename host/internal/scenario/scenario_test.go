package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/domain"
)

// Every scenario script in testdata parses.
func TestTestdataScriptsParse(t *testing.T) {
	files, _ := filepath.Glob("../../../testdata/*/*.steps.json")
	if len(files) == 0 {
		t.Fatal("no scripts found")
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(s.Messages()) == 0 {
			t.Errorf("%s sends nothing", f)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{`:              "scenario script",
		`{"steps":[]}`:   "no steps",
		`{"steps":[{}]}`: "step 1 must do exactly one thing",
		`{"steps":[{"send":"a","interrupt":true}]}`:  "step 1 must do exactly one thing",
		`{"steps":[{"send":"a"},{"waitFor":"tea"}]}`: `step 2: unknown wait "tea"`,
		`{"steps":[{"send":"a","colour":"red"}]}`:    "unknown field",
		`{"steps":[{"send":"a"},{"send":" \n"}]}`:    "scenario script: step 2: the message is empty or only white space",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.json")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}

func TestReached(t *testing.T) {
	th := domain.Thread{Runs: []domain.Run{{ID: "r1", Status: domain.RunStatusRunning}, {ID: "r2", Status: domain.RunStatusQueued}}}
	if !Reached(th, WaitRunning) || Reached(th, WaitText) || Reached(th, WaitRequest) || Reached(th, WaitEnded) {
		t.Fatal("a running run with a queued one")
	}
	if Reached(th, WaitItem) {
		t.Fatal("no turn item yet")
	}
	th.TurnItems = []domain.TurnItem{{RunID: "r0"}}
	if Reached(th, WaitItem) {
		t.Fatal("another run's turn item")
	}
	th.TurnItems = append(th.TurnItems, domain.TurnItem{RunID: "r1", Kind: "command_execution"})
	if !Reached(th, WaitItem) {
		t.Fatal("the run's turn item")
	}
	th.Messages = []domain.Message{{RunID: "r1", Role: domain.RoleAssistant, Text: domain.NewText("hi")}}
	th.Requests = []domain.RuntimeRequest{{Status: domain.RequestStatusPending, Delivery: domain.DeliveryLive}}
	if !Reached(th, WaitText) || !Reached(th, WaitRequest) {
		t.Fatal("text and a pending request")
	}
	th.Requests[0].AnsweredBy = "client"
	if Reached(th, WaitRequest) {
		t.Fatal("an answered request is not waiting")
	}
	th.Runs = th.Runs[:1]
	th.Runs[0].Status = domain.RunStatusFailed
	if !Reached(th, WaitRequest) {
		t.Fatal("a request wait is over once every run has ended")
	}
	if Reached(domain.Thread{}, WaitRunning) || !Reached(domain.Thread{}, WaitEnded) {
		t.Fatal("an empty thread")
	}
}

// FuzzParse: scripts come from users (baton run --script); any input
// either parses into steps that each do one thing, or is an error.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"approve":"ask","steps":[{"send":"a"},{"waitFor":"request"},{"respond":"accept"},{"interrupt":true},{"sleepMs":5}]}`))
	f.Add([]byte(`{"steps":[{"send":"a","mode":"auto"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		if len(s.Steps) == 0 {
			t.Fatal("parsed a script without steps")
		}
	})
}
