package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
	"github.com/baton-run/baton/sdk/transcript"
)

// The transcripts in testdata are recorded from a real command,
// testdata/agent.sh, run by the real plugin:
//
//	go test -run TestRecord -record
//
// The plugin's command is this test binary as a recording shim in front
// of `sh testdata/agent.sh`: for each turn the plugin starts it with the
// prompt appended; the shim writes the arguments the plugin appended (an
// expect_outbound {"argv": [...]} entry), runs the agent with them, passes
// its output on a line at a time, each line an emit_inbound raw entry, and
// its end as a runtime_exit entry (its exit status, or the signal it died
// of, and its stderr), then ends the same way. The replay peer plays
// those entries back as the agent, and checks the arguments of every
// process, the handoff of earlier turns included.

var record = flag.Bool("record", false, "record testdata/*.ndjson from testdata/agent.sh")

// The shim's settings: the transcript it appends to, and how many of its
// arguments are the agent's command (the rest the plugin appended).
const (
	envShimOut   = "BATON_EXEC_RECORD_OUT"
	envShimFixed = "BATON_EXEC_RECORD_FIXED"
)

func TestMain(m *testing.M) {
	if os.Getenv(envShimOut) != "" {
		os.Exit(shim())
	}
	plugintest.Main(m)
}

// recorded are the scenarios recorded, each played from its inputs
// (<scenario>.messages or <scenario>.steps.json).
var recorded = []plugintest.Scenario{plugintest.Simple, plugintest.MultiTurn, plugintest.Interrupt, plugintest.Resume, plugintest.CrashMidTurn, plugintest.MalformedFrames}

func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("records the transcripts: go test -run TestRecord -record")
	}
	bin := plugintest.Build(t, ".")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := filepath.Abs("testdata/agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvStateDir, t.TempDir())
	for _, sc := range recorded {
		t.Run(string(sc), func(t *testing.T) { recordScenario(t, bin, []string{self, "sh", agent}, sc) })
	}
}

func recordScenario(t *testing.T, bin string, argv []string, sc plugintest.Scenario) {
	file := filepath.Join("testdata", string(sc)+".ndjson")
	tmp := file + ".recording"
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	_, err = transcript.NewEncoder(f, transcript.Header{Type: transcript.TypeStart, Provider: "exec", Protocol: WireProtocol,
		Version: "agent.sh", Scenario: string(sc), Metadata: map[string]any{
			"source": transcript.SourceRecorded, "model": "none (testdata/agent.sh is a shell script)",
			"capturedAt": time.Now().UTC().Format(time.RFC3339), "command": "sh testdata/agent.sh",
			"recorder": "go test -run TestRecord -record"}})
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	p := plugintest.Start(t, bin)
	cmd := sdk.ProviderCommand{Argv: argv, Env: []string{envShimOut + "=" + mustAbs(t, tmp), envShimFixed + "=" + strconv.Itoa(len(argv)-1)}}
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: t.TempDir(), Command: cmd})
	for _, st := range steps(t, sc) {
		switch {
		case st.Resume:
			s = s.Resume(t)
		case st.Send != "":
			s.StartTurn(t, st.Send)
		case st.WaitFor == "text":
			s.Until(t, "assistant text", func(ev sdk.RuntimeEvent) bool { return ev.Kind == sdk.EventContentDelta })
		case st.Interrupt:
			s.Interrupt(t, "")
		}
		if st.Send != "" && sc != plugintest.Interrupt || st.Interrupt {
			want := sdk.TurnCompleted
			switch sc {
			case plugintest.Interrupt:
				want = sdk.TurnInterrupted
			case plugintest.CrashMidTurn:
				want = sdk.TurnFailed
			}
			if evs := s.WaitTurn(t); evs[len(evs)-1].Status != want {
				t.Fatalf("recording %s: the turn ended %+v, want %s", sc, evs[len(evs)-1], want)
			}
		}
	}
	s.Close(t)
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", file)
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// steps are what the client does in a recorded scenario: its messages
// (a "---" line resumes the thread in a new session), or its steps.
func steps(t *testing.T, sc plugintest.Scenario) []plugintest.Step {
	base := filepath.Join("testdata", string(sc))
	if _, err := os.Stat(base + ".messages"); err == nil {
		var out []plugintest.Step
		for g, group := range plugintest.ReadGroups(t, base+".messages") {
			if g > 0 {
				out = append(out, plugintest.Step{Resume: true})
			}
			for _, m := range group {
				out = append(out, plugintest.Step{Send: m})
			}
		}
		return out
	}
	b, err := os.ReadFile(base + ".steps.json")
	if err != nil {
		t.Fatal(err)
	}
	var s plugintest.Script
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s.Steps
}

// shim runs the agent for one turn and appends the process to the
// transcript (see the comment at the top).
func shim() int {
	fixed, err := strconv.Atoi(os.Getenv(envShimFixed))
	if err != nil || fixed < 1 || fixed > len(os.Args)-1 {
		fmt.Fprintf(os.Stderr, "shim: %s=%q: want the number of the agent command's arguments\n", envShimFixed, os.Getenv(envShimFixed))
		return 2
	}
	out, err := os.OpenFile(os.Getenv(envShimOut), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "shim: %v\n", err)
		return 2
	}
	defer out.Close()
	write := func(e transcript.Entry) {
		b, _ := json.Marshal(e) // an entry always encodes
		_, _ = out.Write(append(b, '\n'))
	}
	args := os.Args[1:]
	write(transcript.Entry{Type: transcript.TypeExpectOutbound, Label: "argv", Frame: transcript.InvocationFrame(args[fixed:])})
	// The plugin interrupts with SIGTERM to the process group: the agent
	// gets it, and the shim outlives it to record how it died. (Caught,
	// not ignored: an ignored signal stays ignored in the agent.)
	stopped := make(chan os.Signal, 1)
	signal.Notify(stopped, syscall.SIGTERM)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = os.Stdin
	var stderr strings.Builder
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		stderr.Write(b)
		mu.Unlock()
		return os.Stderr.Write(b)
	})
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "shim: %v\n", err)
		return 2
	}
	r := bufio.NewReader(stdout)
	last := time.Now()
	partial := ""
	for {
		line, err := r.ReadString('\n')
		if strings.HasSuffix(line, "\n") {
			text := strings.TrimSuffix(line, "\n")
			if text == "" || strings.HasSuffix(text, "\r") {
				fmt.Fprintln(os.Stderr, "shim: the agent printed a blank line or a CR: a transcript's raw line cannot hold it")
				return 2
			}
			now := time.Now()
			write(transcript.Entry{Type: transcript.TypeEmitInbound, Label: "stdout", Raw: text, AfterMs: int(now.Sub(last).Milliseconds())})
			last = now
			_, _ = os.Stdout.WriteString(line)
		} else {
			partial = line
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "shim: read the agent's stdout: %v\n", err)
			}
			break
		}
	}
	_, _ = os.Stdout.WriteString(partial)
	_ = cmd.Wait()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	exit := transcript.Entry{Type: transcript.TypeRuntimeExit, Label: "exit", Partial: partial, Stderr: stderr.String(),
		Status: transcript.ExitSuccess, Wait: transcript.WaitNow}
	switch {
	case ws.Signaled() && len(stopped) > 0: // the plugin stopped it
		exit.Status, exit.Wait, exit.Signal = transcript.ExitCancelled, transcript.WaitSignal, signalName(ws.Signal())
	case ws.Signaled(): // it died on its own
		exit.Status, exit.Signal = transcript.ExitError, signalName(ws.Signal())
	case ws.ExitStatus() != 0:
		code := ws.ExitStatus()
		exit.Status, exit.Code = transcript.ExitError, &code
	}
	write(exit)
	if ws.Signaled() {
		out.Close()
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		select {} // the signal ends it
	}
	return ws.ExitStatus()
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
