package lineproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/clock/clocktest"
	"github.com/baton-run/baton/sdk/providerproc"
)

// readAll reads a process's stdout to its end, telling it of each line
// that is not {"frame":…} that it is no frame, as a protocol layer does
// (jsonrpcproc for every line it cannot decode, JSON or not).
func readAll(t *testing.T, p *Process) {
	t.Helper()
	for {
		line, _, err := p.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(line, []byte(`{"frame"`)) {
			p.NotFrame(line)
		}
	}
}

// drain reads a process's stdout to its end, in a goroutine of its own.
func drain(p *Process) {
	for {
		if _, _, err := p.Next(); err != nil {
			return
		}
	}
}

// A provider that floods stdout with what is not a frame, or its stderr,
// is told in one sentence all the same: the first line that was not a
// frame and how many more, the last lines of its stderr and of how many.
// A line is counted once whoever says it is not a frame (Next for one
// that is not JSON, the protocol for a JSON object that is not its own),
// and a frame starts the count again.
func TestExitReportCounts(t *testing.T) {
	for name, tc := range map[string]struct{ script, want string }{
		"a flood": {`i=1; while [ $i -le 1000 ]; do echo "garbage $i"; echo "err $i" >&2; i=$((i+1)); done; exit 1`,
			`the agent exited with status 1: it printed "garbage 1", not stream-json, and 999 more lines that were not frames; ` +
				`its stderr ends: err 996; err 997; err 998; err 999; err 1000 (the last 5 of 1000 lines)`},
		"stderr alone": {`printf 'one\n\n  \ntwo\nthree\nfour\nfive\nsix\nseven\n' >&2; exit 1`,
			`the agent exited with status 1: three; four; five; six; seven (the last 5 of 7 lines of its stderr)`},
		"JSON that is not a frame": {`echo '{"frame":1}'; echo '{"not":1}'; echo '{"not":2}'; echo 'garbage'; exit 1`,
			`the agent exited with status 1: it printed "{\"not\":1}", not stream-json, and 2 more lines that were not frames`},
		"one more": {`echo 'garbage'; echo '{"not":1}'; exit 1`,
			`the agent exited with status 1: it printed "garbage", not stream-json, and 1 more line that was not a frame`},
		"a frame between": {`echo 'garbage 1'; echo 'garbage 2'; echo '{"frame":1}'; echo 'garbage 3'; exit 1`,
			`the agent exited with status 1: it printed "garbage 3", not stream-json`},
		"a frame last": {`echo 'garbage 1'; echo '{"not":1}'; echo '{"frame":1}'; exit 1`, `the agent exited with status 1`},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Start(Config{Name: "the agent", Protocol: "stream-json", Dir: t.TempDir(),
				Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", tc.script}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close(context.Background()) })
			readAll(t, p)
			<-p.Done()
			exit := p.Exit("")
			if diff := cmp.Diff(tc.want, exit.Error()); diff != "" {
				t.Errorf("exit report (-want +got):\n%s", diff)
			}
			if !errors.Is(exit, sdk.ErrProviderExited) {
				t.Errorf("the exit %v is not of kind ErrProviderExited", exit)
			}
		})
	}
}

// The provider's stderr goes to the plugin's log (which the host shows) a
// line at a time up to stderrLogLines, then one line says the rest is not
// logged: a flood of 1000 lines logs 21.
func TestStderrLogIsBounded(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Trace, JSONFormat: true})
	p, err := Start(Config{Name: "the agent", Dir: t.TempDir(), Log: log,
		Command: sdk.ProviderCommand{Argv: []string{"sh", "-c", `i=1; while [ $i -le 1000 ]; do echo "err $i" >&2; i=$((i+1)); done`}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	readAll(t, p)
	<-p.Done() // every stderr line has been handed over
	var got, want []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m struct {
			Message string `json:"@message"`
			Line    string `json:"line"`
			Logged  int    `json:"logged"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		got = append(got, fmt.Sprintf("%s|%s|%d", m.Message, m.Line, m.Logged))
	}
	for i := 1; i <= stderrLogLines; i++ {
		want = append(want, fmt.Sprintf("provider stderr|err %d|0", i))
	}
	want = append(want, "provider stderr: more lines are not logged (the raw-frame log keeps them, an exit report quotes the last)||20")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the plugin's log (-want +got):\n%s", diff)
	}
}

// A step that failed while the provider ran (an answer the plugin cannot
// use) is the provider's exit when the provider is on its way out: one
// that fails once its input ends. One that ends cleanly there, or lives
// on, leaves the step's own error; an exit stays as it is.
func TestFailed(t *testing.T) {
	stepErr := errors.New("the agent speaks ACP version 0; this plugin speaks 1")
	t.Run("it fails as its input ends", func(t *testing.T) {
		p := start(t, true, `echo 'Starting' >&2; read line; echo 'fatal: crashed after initialize' >&2; exit 3`)
		go drain(p)
		err := p.Failed(stepErr, "while the session opened")
		want := "the agent exited with status 3 while the session opened: Starting; fatal: crashed after initialize"
		var exit *sdk.ProviderExit
		if !errors.As(err, &exit) || err.Error() != want {
			t.Fatalf("Failed = %v; want the exit %q", err, want)
		}
	})
	t.Run("it ends cleanly", func(t *testing.T) {
		p := start(t, true, `read line; exit 0`)
		go drain(p)
		if err := p.Failed(stepErr, "while the session opened"); err != stepErr {
			t.Fatalf("Failed = %v; want the step's error", err)
		}
	})
	t.Run("it lives on", func(t *testing.T) {
		f := clock.NewFake(epoch)
		p := startOn(t, f, true, `exec sleep 300`)
		failed := make(chan error, 1)
		go func() { failed <- p.Failed(stepErr, "while the session opened") }()
		clocktest.Pending(t, f, "stdin closed", providerproc.GracePeriod)
		f.Advance(providerproc.GracePeriod - time.Millisecond)
		clocktest.Pending(t, f, "a millisecond before the grace period ends", time.Millisecond)
		select {
		case err := <-failed:
			t.Fatalf("Failed returned %v before the grace period ended", err)
		default:
		}
		f.Advance(time.Millisecond)
		if err := clocktest.Within(t, failed); err != stepErr {
			t.Fatalf("Failed = %v; want the step's error", err)
		}
		select {
		case <-p.Done():
			t.Fatal("Failed stopped the provider: that is its owner's to do")
		default:
		}
		_ = p.Signal(syscall.SIGKILL) // (Close's grace periods are on the fake clock)
	})
	t.Run("an exit already", func(t *testing.T) {
		p := start(t, true, `exec sleep 300`)
		exit := &sdk.ProviderExit{Provider: "the agent", Status: 1, When: "before answering initialize"}
		if err := p.Failed(exit, "while the session opened"); err != exit {
			t.Fatalf("Failed = %v; want the exit as it was", err)
		}
		if err := p.Write([]byte(`{"still":"open"}`)); err != nil {
			t.Fatalf("the provider's stdin after Failed of an exit: %v; want it left open", err)
		}
		_ = p.Signal(syscall.SIGKILL)
	})
}
