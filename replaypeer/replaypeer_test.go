package main

import (
	"bufio"
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var bin string // the replaypeer binary under test

// TestMain builds the replay peer once, or uses the one $BATON_REPLAYPEER
// names (`make test` builds it with coverage).
func TestMain(m *testing.M) {
	// The peer processes write their coverage counters where this test
	// binary writes its own (as plugintest.CoverChildren, which would
	// bring all of sdk's dependencies into this module).
	flag.Parse()
	if f := flag.Lookup("test.gocoverdir"); f != nil && f.Value.String() != "" {
		os.Setenv("GOCOVERDIR", f.Value.String())
	}
	if bin = os.Getenv("BATON_REPLAYPEER"); bin != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "replaypeer-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "replaypeer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const header = `{"type":"transcript_start","provider":"acp","protocol":"acp/1","version":"1","scenario":"t","metadata":{"source":"authored"}}`

// peer runs the real replaypeer binary on a transcript, feeding it input
// and closing its stdin; it returns stdout, stderr and the exit code.
func peer(t *testing.T, transcript string, input ...string) (string, string, int) {
	t.Helper()
	ws := t.TempDir()
	f := filepath.Join(t.TempDir(), "t.ndjson")
	if err := os.WriteFile(f, []byte(transcript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--transcript", f, "--workspace", ws, "--speed", "0")
	cmd.Stdin = strings.NewReader(strings.Join(input, ""))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }

func TestWorkspacePlaceholderMustMatch(t *testing.T) {
	tr := lines(header,
		`{"type":"expect_outbound","label":"init","frame":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"cwd":"<workspace>","v":"<any>"}}}`,
		`{"type":"emit_inbound","label":"init.result","frame":{"jsonrpc":"2.0","id":0,"result":{"ok":true}}}`,
		`{"type":"runtime_exit","status":"success"}`)
	// The client uses id 7 and an absolute workspace path of its own.
	_, stderr, code := peer(t, tr, `{"method":"initialize","id":7,"jsonrpc":"2.0","params":{"v":3,"cwd":"WS"}}`+"\n")
	if code != 3 || !strings.Contains(stderr, "$.params.cwd") {
		t.Fatalf("a wrong cwd should be a mismatch naming $.params.cwd; exit %d, stderr:\n%s", code, stderr)
	}
}

func TestMismatchExplainsItself(t *testing.T) {
	tr := lines(header,
		`{"type":"expect_outbound","label":"prompt","frame":{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"text":"hello"}}}`,
		`{"type":"runtime_exit","status":"success"}`)
	_, stderr, code := peer(t, tr, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"text":"goodbye"}}`+"\n")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (mismatch); stderr:\n%s", code, stderr)
	}
	for _, want := range []string{`"prompt"`, `expected:`, `actual:`, `"hello"`, `"goodbye"`, `$.params.text: expected "hello", got "goodbye"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestLeftoverEntriesAreAnError(t *testing.T) {
	tr := lines(header,
		`{"type":"expect_outbound","label":"first","frame":{"jsonrpc":"2.0","id":0,"method":"a"}}`,
		`{"type":"emit_inbound","frame":{"jsonrpc":"2.0","id":0,"result":{}}}`,
		`{"type":"expect_outbound","label":"second","frame":{"jsonrpc":"2.0","id":1,"method":"b"}}`,
		`{"type":"runtime_exit","status":"success"}`)
	out, stderr, code := peer(t, tr, `{"jsonrpc":"2.0","id":5,"method":"a"}`+"\n")
	if code != 4 {
		t.Fatalf("exit %d, want 4 (entries left); stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, `"second"`) || !strings.Contains(stderr, "entry 3 (line 4") {
		t.Errorf("stderr should name the first unused entry (entry 3, line 4, \"second\"):\n%s", stderr)
	}
	// The response carried the id the client really used.
	if strings.TrimSpace(out) != `{"id":5,"jsonrpc":"2.0","result":{}}` {
		t.Errorf("stdout = %q, want the response rebound to id 5", out)
	}
}

func TestBadTranscript(t *testing.T) {
	for name, tc := range map[string]struct{ transcript, want string }{
		"no header":     {lines(`{"type":"emit_inbound","frame":{}}`), "line 1: the first line must be a transcript_start header"},
		"unknown entry": {lines(header, `{"type":"emit_outbound","frame":{}}`), `line 2: unknown entry type "emit_outbound"`},
		"bad JSON":      {lines(header, `{"type":"emit_inbound",`), "line 2: bad JSON"},
		"no source":     {lines(`{"type":"transcript_start","provider":"p","protocol":"x","scenario":"s","metadata":{}}`), "metadata.source"},
		"bad exit":      {lines(header, `{"type":"runtime_exit","status":"crashed"}`), "line 2: runtime_exit status"},
		"escaping path": {lines(header, `{"type":"workspace","op":"write","path":"../x","content":""}`), "line 2: workspace path"},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := peer(t, tc.transcript)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

func TestUnexpectedFrameAfterTheEnd(t *testing.T) {
	tr := lines(header, `{"type":"runtime_exit","status":"success"}`)
	_, stderr, code := peer(t, tr, `{"jsonrpc":"2.0","id":1,"method":"late"}`+"\n")
	if code != 5 || !strings.Contains(stderr, `"late"`) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 5 naming the late frame", code, stderr)
	}
}

func TestWorkspaceEntriesAndErrorExit(t *testing.T) {
	ws := t.TempDir()
	tr := lines(header,
		`{"type":"workspace","op":"write","path":"a/b.txt","content":"one"}`,
		`{"type":"workspace","op":"rename","path":"a/b.txt","to":"c.txt"}`,
		`{"type":"emit_inbound","frame":{"jsonrpc":"2.0","method":"note","params":{"path":"<workspace>/c.txt"}}}`,
		`{"type":"runtime_exit","status":"error","error":"boom"}`)
	f := filepath.Join(t.TempDir(), "t.ndjson")
	os.WriteFile(f, []byte(tr), 0o644)
	cmd := exec.Command(bin, "--transcript", f, "--workspace", ws, "--speed", "0")
	stdin, _ := cmd.StdinPipe() // never closed: an error exit does not wait for it
	defer stdin.Close()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("an error exit should not wait for stdin to close")
	}
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(errb.String(), "boom") {
		t.Errorf("exit %d, stderr %q; want 1 and the recorded error", cmd.ProcessState.ExitCode(), errb.String())
	}
	if b, err := os.ReadFile(filepath.Join(ws, "c.txt")); err != nil || string(b) != "one" {
		t.Errorf("c.txt = %q, %v; want the written then renamed file", b, err)
	}
	if !strings.Contains(out.String(), ws+"/c.txt") {
		t.Errorf("stdout %q should carry the real workspace path", out.String())
	}
}

// The recorder keeps the provider's workspace changes and leaves out the
// client's own (a replay's client makes them again): a change found before
// a frame from the client is taken as the new state, unrecorded.
func TestRecordKeepsOnlyTheProvidersChanges(t *testing.T) {
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "t.ndjson")
	cmd := exec.Command(bin, "record", "--out", out, "--provider", "p", "--protocol", "x", "--scenario", "s", "--workspace", ws, "--",
		"sh", "-c", `echo '{"r":0}'; read line; echo made > provider.txt; echo '{"b":2}'; read rest`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	if _, err := rd.ReadString('\n'); err != nil { // the provider is up: the first scan is done
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "client.txt"), []byte("mine"), 0o644)
	io.WriteString(stdin, `{"a":1}`+"\n")
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, `"b"`) {
		t.Fatalf("the provider's frame: %q %v", line, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record: %v", err)
	}
	b, _ := os.ReadFile(out)
	got := string(b)
	if !strings.Contains(got, `"path":"provider.txt"`) || strings.Contains(got, "client.txt") {
		t.Errorf("transcript:\n%s\nwant provider.txt written and client.txt left out", got)
	}
	if strings.Index(got, `"path":"provider.txt"`) > strings.Index(got, `"b":2`) {
		t.Errorf("the provider's change comes after the frame it preceded:\n%s", got)
	}
}

// A provider started once per turn with the plugin's own arguments: each
// process checks its arguments as its first frame and continues the
// transcript where the last one ended (the cursor in the state file).
func TestInvocationFramesAcrossProcesses(t *testing.T) {
	ws, dir := t.TempDir(), t.TempDir()
	tr := lines(header,
		`{"type":"expect_outbound","label":"turn 1","frame":{"argv":["-p","--workspace","<workspace>","--","hello"]}}`,
		`{"type":"emit_inbound","frame":{"type":"result","n":1}}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`,
		`{"type":"expect_outbound","label":"turn 2","frame":{"argv":["-p","--resume","<any>","--","again"]}}`,
		`{"type":"emit_inbound","frame":{"type":"result","n":2}}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`)
	f := filepath.Join(dir, "t.ndjson")
	os.WriteFile(f, []byte(tr), 0o644)
	state := filepath.Join(dir, "cursor")
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, append([]string{"--transcript", f, "--workspace", ws, "--speed", "0", "--state", state, "--"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), errb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), 0
	}
	if out, stderr, code := run("-p", "--workspace", ws, "--", "hello"); code != 0 || !strings.Contains(out, `"n":1`) {
		t.Fatalf("turn 1: exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
	if out, stderr, code := run("-p", "--resume", "chat-1", "--", "again"); code != 0 || !strings.Contains(out, `"n":2`) {
		t.Fatalf("turn 2: exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
	// Wrong arguments are a mismatch that names them.
	os.Remove(state)
	if _, stderr, code := run("-p", "--workspace", ws, "--", "goodbye"); code != 3 || !strings.Contains(stderr, `$.argv[4]: expected "hello", got "goodbye"`) {
		t.Fatalf("wrong arguments: exit %d, stderr:\n%s", code, stderr)
	}
	// A peer started without "--" has no invocation: the expectation is
	// left unused, and named.
	if _, stderr, code := peer(t, tr); code != 4 || !strings.Contains(stderr, `"turn 1"`) {
		t.Fatalf("no invocation: exit %d, stderr:\n%s", code, stderr)
	}
	// Arguments without "--" are bad usage.
	cmd := exec.Command(bin, "--transcript", f, "hello")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("arguments without \"--\": %v, want exit 2", err)
	}
}

// A provider interrupted by ending it: the runtime_exit that waits for a
// signal keeps the peer alive (stdin at its end) until SIGTERM, then saves
// the cursor past it and exits as the entry says.
func TestRuntimeExitWaitsForASignal(t *testing.T) {
	dir := t.TempDir()
	tr := lines(header,
		`{"type":"emit_inbound","frame":{"type":"working"}}`,
		`{"type":"runtime_exit","status":"cancelled","wait":"signal"}`,
		`{"type":"emit_inbound","frame":{"type":"next process"}}`,
		`{"type":"runtime_exit","status":"success","wait":"now"}`)
	f := filepath.Join(dir, "t.ndjson")
	os.WriteFile(f, []byte(tr), 0o644)
	state := filepath.Join(dir, "cursor")
	cmd := exec.Command(bin, "--transcript", f, "--workspace", dir, "--speed", "0", "--state", state)
	cmd.Stdin = strings.NewReader("") // at its end at once
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, "working") {
		t.Fatalf("first frame: %q %v", line, err)
	}
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, rd); done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the peer ended before it was stopped: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130 (cancelled)", code)
	}
	next := exec.Command(bin, "--transcript", f, "--workspace", dir, "--speed", "0", "--state", state)
	out, err := next.Output()
	if err != nil || !strings.Contains(string(out), "next process") {
		t.Fatalf("the next process: %q %v; want it to continue after the signal", out, err)
	}
}

// Recording with --invocation: the arguments after the second "--" are the
// client's, recorded as the invocation frame, and the transcript replays
// with them.
func TestRecordInvocation(t *testing.T) {
	ws, dir := t.TempDir(), t.TempDir()
	out := filepath.Join(dir, "t.ndjson")
	cmd := exec.Command(bin, "record", "--invocation", "--out", out, "--provider", "p", "--protocol", "x", "--scenario", "s",
		"--workspace", ws, "--", "sh", "-c", `printf '{"args":"%s %s"}\n' "$1" "$2"`, "sh", "--", "-p", ws+"/x")
	cmd.Stdin = strings.NewReader("")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), `{"args":"-p `+ws+`/x"}`) {
		t.Fatalf("record: %v\n%s", err, b)
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), `{"type":"expect_outbound","label":"1.invocation","frame":{"argv":["-p","<workspace>/x"]}}`) {
		t.Fatalf("transcript:\n%s\nwant the invocation frame first, the workspace redacted", b)
	}
	ws2 := t.TempDir()
	play := exec.Command(bin, "--transcript", out, "--workspace", ws2, "--speed", "0", "--", "-p", ws2+"/x")
	play.Stdin = strings.NewReader("")
	if b, err := play.CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, b)
	}
}

// peer-args says what a peer command needs for each kind of transcript.
func TestPeerArgs(t *testing.T) {
	for file, want := range map[string]string{
		"../testdata/acp/simple.ndjson":      "",
		"../testdata/claude/simple.ndjson":   "--",
		"../testdata/opencode/simple.ndjson": "--listen 127.0.0.1:0 --",
	} {
		out, err := exec.Command(bin, "peer-args", file).Output()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("peer-args %s = %q, %v; want %q", file, out, err, want)
		}
	}
	if err := exec.Command(bin, "peer-args").Run(); err == nil {
		t.Error("peer-args without a file succeeded")
	}
}
