package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var bin string // the replaypeer binary under test

// TestMain builds the replay peer once, or uses the one $BATON_REPLAYPEER
// names (`make test` builds it with coverage).
func TestMain(m *testing.M) {
	if names := os.Getenv(envIgnore); names != "" {
		os.Exit(execIgnoring(names, os.Args[1:]))
	}
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

// envIgnore makes this test binary a parent that ignores the signals it
// names (comma-separated) and then execs its arguments: the program starts
// with them ignored, as under nohup (SIGHUP) or in a shell's background
// job (SIGINT). exec.Cmd alone cannot start a child so.
const envIgnore = "REPLAYPEER_TEST_IGNORE"

// execIgnoring is the envIgnore parent. It returns only if it cannot exec.
func execIgnoring(names string, argv []string) int {
	byName := map[string]syscall.Signal{"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM}
	for name := range strings.SplitSeq(names, ",") {
		sig, ok := byName[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "%s=%s: %q is not one of SIGHUP, SIGINT, SIGTERM\n", envIgnore, names, name)
			return 2
		}
		signal.Ignore(sig)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envIgnore+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec(argv[0], argv, env)
	fmt.Fprintf(os.Stderr, "exec %s: %v\n", argv[0], err)
	return 2
}

const header = `{"type":"transcript_start","provider":"acp","protocol":"acp/1","version":"1","scenario":"t","metadata":{"source":"authored"}}`

// peer runs the real replaypeer binary on a transcript, feeding it input
// and closing its stdin; it returns stdout, stderr and the exit code.
func peer(t *testing.T, transcript string, input ...string) (string, string, int) {
	t.Helper()
	return peerWith(t, transcript, []string{"--speed", "0"}, input...)
}

// peerWith is peer with flags of the test's own.
func peerWith(t *testing.T, transcript string, flags []string, input ...string) (string, string, int) {
	t.Helper()
	f := writeTranscript(t, transcript)
	cmd := exec.Command(bin, append([]string{"--transcript", f, "--workspace", t.TempDir()}, flags...)...)
	cmd.Stdin = strings.NewReader(strings.Join(input, ""))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	code := wait(t, cmd)
	return out.String(), errb.String(), code
}

func writeTranscript(t *testing.T, transcript string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "t.ndjson")
	if err := os.WriteFile(f, []byte(transcript), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// wait waits for a started peer to end and returns its exit code (-1 when
// a signal ended it). A peer still running after 30 seconds is stuck: it is
// killed and the test fails.
func wait(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the peer did not end (%v)", cmd.Args)
	}
	return cmd.ProcessState.ExitCode()
}

// trace gives cmd a trace on fd 3 ("--trace /dev/fd/3" must be among its
// flags) and returns its lines. Call it before cmd.Start, and done after.
func trace(t *testing.T, cmd *exec.Cmd) (lines <-chan string, started func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{w}
	ch := make(chan string, 64)
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch, func() { w.Close() }
}

// awaitTrace reads trace lines until one contains want: the peer has got
// there. It fails the test if the trace ends first.
func awaitTrace(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the peer's trace ended without %q; it had:\n%s", want, strings.Join(seen, "\n"))
			}
			if strings.Contains(l, want) {
				return
			}
			seen = append(seen, l)
		case <-time.After(30 * time.Second):
			t.Fatalf("no %q in the peer's trace after 30s; it had:\n%s", want, strings.Join(seen, "\n"))
		}
	}
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
	cmd := exec.Command(bin, "record", "--out", out, "--provider", "p", "--protocol", "x", "--scenario", "s", "--workspace", ws,
		"--meta", "agentVersion=1.2.3", "--meta", "model=scripted", "--",
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
	cmd := exec.Command(bin, "--transcript", f, "--workspace", dir, "--speed", "0", "--state", state, "--trace", "/dev/fd/3")
	cmd.Stdin = strings.NewReader("") // at its end at once
	stdout, _ := cmd.StdoutPipe()
	steps, started := trace(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started()
	rd := bufio.NewReader(stdout)
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, "working") {
		t.Fatalf("first frame: %q %v", line, err)
	}
	// The peer saw its stdin end and waits on: only a signal ends it.
	awaitTrace(t, steps, "entry 2 (line 3, runtime_exit): stdin closed, waiting for a signal")
	cmd.Process.Signal(syscall.SIGTERM)
	awaitTrace(t, steps, "entry 2 (line 3, runtime_exit): stopped by a signal")
	go io.Copy(io.Discard, rd)
	if code := wait(t, cmd); code != 130 {
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
		"--workspace", ws, "--meta", "agentVersion=1.2.3", "--meta", "model=scripted", "--", "sh", "-c", `printf '{"args":"%s %s"}\n' "$1" "$2"`, "sh", "--", "-p", ws+"/x")
	cmd.Stdin = strings.NewReader("")
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), `{"args":"-p `+ws+`/x"}`) {
		t.Fatalf("record: %v\n%s", err, b)
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), `{"type":"expect_outbound","label":"1.invocation","frame":{"argv":["-p","<workspace>/x"]}}`) {
		t.Fatalf("transcript:\n%s\nwant the invocation frame first, the workspace redacted", b)
	}
	// The header says what it was recorded from: the provider's version is
	// the header's.
	hdr, _, _ := strings.Cut(string(b), "\n")
	if !strings.Contains(hdr, `"version":"1.2.3"`) || !strings.Contains(hdr, `"model":"scripted"`) || !strings.Contains(hdr, `"capturedAt":"`) {
		t.Errorf("header %s: want the provider's version, the model and the capture time", hdr)
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

// A recording must say which provider version and model it was made from.
func TestRecordNeedsVersionAndModel(t *testing.T) {
	for _, tc := range []struct{ meta []string }{{[]string{"--meta", "model=m"}}, {[]string{"--meta", "agentVersion=1"}}} {
		args := append([]string{"record", "--out", filepath.Join(t.TempDir(), "t.ndjson"), "--provider", "p", "--protocol", "x", "--scenario", "s"}, tc.meta...)
		cmd := exec.Command(bin, append(args, "--", "true")...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "is required: a recorded transcript says which provider version and model") {
			t.Errorf("record with %v: %v\n%s\nwant exit 2 saying what is missing", tc.meta, err, out)
		}
	}
}

// A recording must name the wire protocol: a header without one does not
// decode, so the recording could never be played.
func TestRecordNeedsProtocol(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.ndjson")
	cmd := exec.Command(bin, "record", "--out", out, "--provider", "p", "--scenario", "s",
		"--meta", "agentVersion=1", "--meta", "model=m", "--", "true")
	b, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(b), "--protocol is required: the plugin's wire protocol") {
		t.Errorf("record without --protocol: %v\n%s\nwant exit 2 saying --protocol is required", err, b)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("record without --protocol wrote %s (%v)", out, err)
	}
}

// A frame the client sends before the peer has sent the entries the
// transcript has before its expectation came too early: a mismatch, here
// while the peer waits out an afterMs before the response it should have
// waited for.
func TestSentTooEarly(t *testing.T) {
	tr := lines(header,
		`{"type":"expect_outbound","label":"a","frame":{"jsonrpc":"2.0","id":0,"method":"a"}}`,
		`{"type":"emit_inbound","label":"a.result","frame":{"jsonrpc":"2.0","id":0,"result":{}},"afterMs":600000}`,
		`{"type":"expect_outbound","label":"b","frame":{"jsonrpc":"2.0","id":1,"method":"b"}}`,
		`{"type":"emit_inbound","frame":{"jsonrpc":"2.0","id":1,"result":{}}}`,
		`{"type":"runtime_exit","status":"success"}`)
	a, b := `{"jsonrpc":"2.0","id":0,"method":"a"}`+"\n", `{"jsonrpc":"2.0","id":1,"method":"b"}`+"\n"
	out, stderr, code := peerWith(t, tr, []string{"--speed", "1"}, a, b)
	want := `mismatch at entry 3 (line 4, expect_outbound "b"): sent too early: the frame arrived before entry 2 (line 3, emit_inbound "a.result") was sent, which the transcript has before it`
	if code != 3 || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 3 (mismatch) and %q", code, stderr, want)
	}
	if out != "" {
		t.Errorf("stdout %q: the response was sent after all", out)
	}
	// A client that waits for the response plays the transcript through.
	f := writeTranscript(t, tr)
	cmd := exec.Command(bin, "--transcript", f, "--workspace", t.TempDir(), "--speed", "0")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	io.WriteString(stdin, a)
	if l, err := rd.ReadString('\n'); err != nil || !strings.Contains(l, `"id":0`) {
		t.Fatalf("response to a: %q %v", l, err)
	}
	io.WriteString(stdin, b)
	if l, err := rd.ReadString('\n'); err != nil || !strings.Contains(l, `"id":1`) {
		t.Fatalf("response to b: %q %v", l, err)
	}
	stdin.Close()
	if code := wait(t, cmd); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// The cursor is saved at every entry consumed: a mismatch leaves it at the
// entry that failed, and a peer started again there continues with it.
func TestCursorSavedAtEveryEntry(t *testing.T) {
	tr := lines(header,
		`{"type":"workspace","op":"write","path":"a.txt","content":"a"}`,
		`{"type":"expect_outbound","label":"first","frame":{"jsonrpc":"2.0","method":"a"}}`,
		`{"type":"expect_outbound","label":"second","frame":{"jsonrpc":"2.0","id":1,"method":"b"}}`,
		`{"type":"emit_inbound","frame":{"jsonrpc":"2.0","id":1,"result":{}}}`,
		`{"type":"runtime_exit","status":"success"}`)
	f := writeTranscript(t, tr)
	state := filepath.Join(t.TempDir(), "cursor")
	ws := t.TempDir()
	run := func(input ...string) (string, int) {
		cmd := exec.Command(bin, "--transcript", f, "--workspace", ws, "--speed", "0", "--state", state)
		cmd.Stdin = strings.NewReader(strings.Join(input, ""))
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		code := wait(t, cmd)
		return errb.String(), code
	}
	cursor := func() map[string]any {
		b, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("state file %q: %v", b, err)
		}
		return st
	}
	a, b, wrong := `{"jsonrpc":"2.0","method":"a"}`+"\n", `{"jsonrpc":"2.0","id":6,"method":"b"}`+"\n", `{"jsonrpc":"2.0","method":"wrong"}`+"\n"
	var got []map[string]any
	// Past the workspace entry, a mismatch at the first expectation.
	if stderr, code := run(wrong); code != 3 {
		t.Fatalf("exit %d, want 3 (mismatch): %s", code, stderr)
	}
	got = append(got, cursor())
	// Started again there: past the first expectation, a mismatch at the
	// second.
	if stderr, code := run(a, wrong); code != 3 {
		t.Fatalf("exit %d, want 3 (mismatch): %s", code, stderr)
	}
	got = append(got, cursor())
	// Started again there: to the end.
	if stderr, code := run(b); code != 0 {
		t.Fatalf("the peer started at the cursor: exit %d: %s", code, stderr)
	}
	got = append(got, cursor())
	want := []map[string]any{
		{"cursor": 1.0, "next": `entry 2 (line 3, expect_outbound "first")`},
		{"cursor": 2.0, "next": `entry 3 (line 4, expect_outbound "second")`},
		{"cursor": 5.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the cursor after each peer (-want +got):\n%s", diff)
	}
}

// A peer that crashes (here: is killed) leaves the cursor where it was:
// past every entry it consumed.
func TestCursorAfterACrash(t *testing.T) {
	tr := lines(header,
		`{"type":"expect_outbound","label":"first","frame":{"jsonrpc":"2.0","id":0,"method":"a"}}`,
		`{"type":"emit_inbound","frame":{"jsonrpc":"2.0","id":0,"result":{}}}`,
		`{"type":"emit_inbound","frame":{"jsonrpc":"2.0","method":"note"}}`,
		`{"type":"expect_outbound","label":"second","frame":{"jsonrpc":"2.0","id":1,"method":"b"}}`,
		`{"type":"runtime_exit","status":"success"}`)
	f := writeTranscript(t, tr)
	state := filepath.Join(t.TempDir(), "cursor")
	cmd := exec.Command(bin, "--transcript", f, "--workspace", t.TempDir(), "--speed", "0", "--state", state)
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":0,"method":"a"}`+"\n")
	rd := bufio.NewReader(stdout)
	for _, want := range []string{`"result"`, `"note"`} {
		if l, err := rd.ReadString('\n'); err != nil || !strings.Contains(l, want) {
			t.Fatalf("frame %q %v, want %s", l, err, want)
		}
	}
	// The frames were flushed after the cursor moved past them.
	cmd.Process.Kill()
	wait(t, cmd)
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"cursor":3,"next":"entry 4 (line 5, expect_outbound \"second\")"}`; got != want {
		t.Errorf("state file %s, want %s", got, want)
	}
}

// How a process ends: the runtime_exit entry's exit code and stderr text,
// death by a signal, a last frame cut short, stdout closed while the
// process lives on.
func TestExitSimulation(t *testing.T) {
	emit := `{"type":"emit_inbound","frame":{"type":"system","n":1}}`
	t.Run("code and stderr", func(t *testing.T) {
		out, stderr, code := peer(t, lines(header, emit,
			`{"type":"runtime_exit","status":"error","code":42,"stderr":"Error: model \"x\" not found\n"}`))
		if code != 42 || stderr != "Error: model \"x\" not found\n" || out != `{"type":"system","n":1}`+"\n" {
			t.Errorf("exit %d, stderr %q, stdout %q; want 42, the entry's text alone and the frame", code, stderr, out)
		}
	})
	t.Run("status codes", func(t *testing.T) {
		got := map[string]int{}
		for _, st := range []string{"success", "error", "cancelled"} {
			_, _, got[st] = peer(t, lines(header, `{"type":"runtime_exit","status":"`+st+`","wait":"now"}`))
		}
		if diff := cmp.Diff(map[string]int{"success": 0, "error": 1, "cancelled": 130}, got); diff != "" {
			t.Errorf("exit codes by status (-want +got):\n%s", diff)
		}
	})
	// Each signal, whatever disposition the peer inherited: the default, or
	// ignored (a `make test` under nohup, or in a background job).
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		for _, inherited := range []string{"", "SIGHUP,SIGINT,SIGTERM"} {
			name := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGHUP: "SIGHUP"}[sig]
			test := "killed by " + name
			if inherited != "" {
				test += ", started with " + inherited + " ignored"
			}
			t.Run(test, func(t *testing.T) {
				f := writeTranscript(t, lines(header, emit, `{"type":"runtime_exit","status":"error","signal":"`+name+`"}`))
				cmd := exec.Command(bin, "--transcript", f, "--workspace", t.TempDir(), "--speed", "0")
				if inherited != "" {
					cmd = exec.Command(self, cmd.Args...)
					cmd.Env = append(os.Environ(), envIgnore+"="+inherited)
				}
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				wait(t, cmd)
				ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
				if !ws.Signaled() || ws.Signal() != sig || errb.Len() != 0 || out.String() != `{"type":"system","n":1}`+"\n" {
					t.Errorf("wait status %v (signaled %v), stderr %q, stdout %q; want killed by %v, nothing on stderr, the frame",
						ws, ws.Signaled(), errb.String(), out.String(), sig)
				}
			})
		}
	}
	t.Run("truncated last frame", func(t *testing.T) {
		out, stderr, code := peer(t, lines(header, emit, `{"type":"runtime_exit","status":"error","partial":"{\"type\":\"resu"}`))
		if want := `{"type":"system","n":1}` + "\n" + `{"type":"resu`; out != want || code != 1 {
			t.Errorf("stdout %q, exit %d (stderr %s); want %q, 1", out, code, stderr, want)
		}
	})
	t.Run("stdout closed, the process living on", func(t *testing.T) {
		f := writeTranscript(t, lines(header, emit, `{"type":"runtime_exit","status":"error","code":3,"closeStdout":true,"wait":"stdin_close"}`))
		cmd := exec.Command(bin, "--transcript", f, "--workspace", t.TempDir(), "--speed", "0", "--trace", "/dev/fd/3")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		steps, started := trace(t, cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started()
		// stdout ends while stdin is still open.
		all := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(stdout); all <- b }()
		select {
		case b := <-all:
			if string(b) != `{"type":"system","n":1}`+"\n" {
				t.Errorf("stdout %q", b)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("stdout was not closed")
		}
		awaitTrace(t, steps, "entry 2 (line 3, runtime_exit): stdout closed")
		stdin.Close()
		// It lived on to see its stdin close, and then ended.
		awaitTrace(t, steps, "entry 2 (line 3, runtime_exit): stdin closed")
		if code := wait(t, cmd); code != 3 {
			t.Errorf("exit %d, want 3", code)
		}
	})
}
