//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/service"
)

// Bad input writes nothing: every verb refuses what it cannot take before
// anything is written, saying what was wrong in words, and the store is
// as it was; on a host embedded for the command and through a service.

// hosts are the two ways a verb reaches the host.
var hosts = []string{"embedded", "service"}

// aThreadOn is a data dir holding one thread with one completed run
// (acp/simple), reached embedded or through a `baton serve` on it, and a
// snapshot of what the store holds: every event read from the store
// (embedded), or every thread's summary and projection through the API
// (a service holds the store).
func aThreadOn(t *testing.T, host string) (data, thread string, snapshot func() string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	snapshot = func() string {
		t.Helper()
		recs, err := storeEvents(t, data)
		if err != nil {
			t.Fatalf("read the store: %v", err)
		}
		b, _ := json.MarshalIndent(recs, "", " ")
		return string(b)
	}
	if host == "service" {
		startServe(t, data)
		conn, err := service.Dial(t.Context(), filepath.Join(data, "baton.sock"), service.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c := batonv1.NewBatonClient(conn)
		snapshot = func() string {
			t.Helper()
			list, err := c.ListThreads(t.Context(), &batonv1.ListThreadsRequest{})
			if err != nil {
				t.Fatalf("list threads: %v", err)
			}
			var b strings.Builder
			for _, s := range list.GetThreads() {
				th, err := c.GetThread(t.Context(), &batonv1.GetThreadRequest{ThreadId: s.GetId()})
				if err != nil {
					t.Fatalf("get thread %s: %v", s.GetId(), err)
				}
				fmt.Fprintf(&b, "%s\n%s\n", protojson.Format(s), protojson.Format(th))
			}
			return b.String()
		}
	}
	out, errOut, code := baton(t, "run", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/simple.ndjson"), lines(t, "acp/simple.messages")[0])
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	return data, threadOf(t, out), snapshot
}

// goInternals are words of Go's or gRPC's that a user is never shown.
var goInternals = regexp.MustCompile(`strconv\.|time: |grpc: |rpc error|desc = |panic|goroutine |invalid argument ".*" for`)

func TestBadInputWritesNothing(t *testing.T) {
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			data, thread, snapshot := aThreadOn(t, host)
			dir := t.TempDir()
			write := func(name string, b []byte) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			}
			blank := write("blank.txt", []byte(" \n\t\n"))
			big := write("big.log", []byte(strings.Repeat("x", domain.MaxMessageBytes+1)))
			binary := write("binary", []byte("ok\x00\xff"))
			file := write("file", nil)
			script := write("blank.steps.json", []byte(`{"steps":[{"send":"hi"},{"send":" "}]}`))
			longSock := filepath.Join(dir, strings.Repeat("s", service.MaxSocketPath))
			longData := filepath.Join(dir, strings.Repeat("d", service.MaxSocketPath))
			const blankHint = "is empty or only white space; give the text to send (- reads it from stdin, --file PATH from a file)"
			for _, tc := range []struct {
				args  []string // {T} is the thread
				stdin string
				code  int
				want  string // stderr's last line ("" for interrupt, whose words are another change's)
			}{
				// run: its messages, each checked before anything is made
				{[]string{"run", "--provider", "acp", ""}, "", 2, "run: the message " + blankHint},
				{[]string{"run", "--provider", "acp", "ok", " \n "}, "", 2, "run: message 2 " + blankHint},
				{[]string{"run", "--thread", "{T}", "\t"}, "", 2, "run: the message " + blankHint},
				{[]string{"run", "--provider", "acp", "-"}, " \n", 2, "run: the message read from stdin (-) is empty or only white space; give the text to send (- reads it from stdin, --file PATH from a file)"},
				{[]string{"run", "--provider", "acp", "--file", blank}, "", 2, "run: --file " + blank + " " + blankHint},
				{[]string{"run", "--provider", "acp", "--file", big}, "", 2, "run: --file " + big + " is 16777217 bytes; the limit is 16 MiB"},
				{[]string{"run", "--provider", "acp", "-"}, strings.Repeat("y", domain.MaxMessageBytes+5), 2, "run: the message read from stdin (-) is 16777221 bytes; the limit is 16 MiB"},
				{[]string{"run", "--provider", "acp", "--file", binary}, "", 2, "run: --file " + binary + " is not UTF-8 text (at byte 3)"},
				{[]string{"run", "--provider", "acp", "--file", filepath.Join(dir, "none")}, "", 2, "run: --file " + filepath.Join(dir, "none") + ": no such file or directory"},
				{[]string{"run", "--provider", "acp", "--file", dir}, "", 2, "run: --file " + dir + " is a directory; give a file that holds the message"},
				{[]string{"run", "--provider", "acp", "hi", "--file", blank}, "", 2, "run: give MESSAGE arguments or --file, not both"},
				{[]string{"run", "--provider", "acp", "-", "-"}, "hi", 2, "run: - (stdin) is given twice; stdin holds one message"},
				{[]string{"run", "--provider", "acp", "--script", script}, "", 2, "run: --script: " + script + ": scenario script: step 2: the message is empty or only white space"},
				{[]string{"run", "--provider", "acp", "--approve", "ask", "-"}, "hi", 2, "run: --approve ask reads your answers from stdin, which held the message (-); give --approve accept or decline, or the message with --file"},
				// run: its flags
				{[]string{"run", "--provider", "nosuch", "hi"}, "", 2, `run: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"run", "--provider", "acp", "--approve", "maybe", "hi"}, "", 2, `run: --approve must be ask, accept or decline, got "maybe"`},
				{[]string{"run", "--provider", "acp", "--on-limit", "switch:nosuch", "hi"}, "", 2, `run: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"run", "--provider", "acp", "--max-runs", "-1", "hi"}, "", 2, "run: --max-runs must be a count (0: the default), got -1"},
				{[]string{"run", "--provider", "acp", "--max-runs", "x", "hi"}, "", 2, `run: --max-runs "x": give a whole number`},
				{[]string{"run", "--provider", "acp", "--max-hours", "soon", "hi"}, "", 2, `run: --max-hours "soon": give a number, like 2 or 0.5`},
				{[]string{"run", "--provider", "acp", "--max-wait", "7", "hi"}, "", 2, `run: --max-wait "7": give a duration, like 90s, 10m or 1h30m`},
				{[]string{"run", "--provider", "acp", "--detach=maybe", "hi"}, "", 2, `run: --detach "maybe": give true or false`},
				{[]string{"run", "--provider", "acp", "--handoff-max-bytes", "10", "hi"}, "", 2, "run: --handoff-max-bytes must be at least 4096, got 10"},
				{[]string{"run", "--thread", "thr_nope", "hi"}, "", 2, `not found: thread "thr_nope"`},
				{[]string{"run", "--thread", "{T}", "--provider", "nosuch", "hi"}, "", 2, `run: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"run", "--thread", "{T}", "--on-limit", "switch:nosuch", "hi"}, "", 2, `run: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"run", "--provider", "acp", "--cwd", filepath.Join(dir, "none"), "hi"}, "", 2, "invalid command: cwd " + filepath.Join(dir, "none") + " does not exist; give a directory that exists"},
				// send
				{[]string{"send", "{T}", ""}, "", 2, "send: the message " + blankHint},
				{[]string{"send", "{T}", "-"}, "", 2, "send: the message read from stdin (-) is empty or only white space; give the text to send (- reads it from stdin, --file PATH from a file)"},
				{[]string{"send", "{T}", "--file", big}, "", 2, "send: --file " + big + " is 16777217 bytes; the limit is 16 MiB"},
				{[]string{"send", "{T}"}, "", 2, "send: give the MESSAGE to send (or - to read it from stdin, or --file PATH)"},
				{[]string{"send", "{T}", "hi", "--file", blank}, "", 2, "send: give MESSAGE arguments or --file, not both"},
				{[]string{"send", "{T}", "hi", "there"}, "", 2, `send: unexpected arguments ["there"] (quote a MESSAGE of several words)`},
				{[]string{"send", "{T}", "--mode", "sideways", "hi"}, "", 2, `send: --mode must be queue, steer, restart or now, got "sideways"`},
				{[]string{"send", "{T}", "--mode", "steer", "hi"}, "", 1, "send: conflict: steer needs an active run, and thread {T} has none"},
				{[]string{"send", "{T}", "--mode", "steer", "--run", "0", "hi"}, "", 2, "send: --run must be a run ordinal from 1, got 0"},
				{[]string{"send", "{T}", "--mode", "steer", "--run", "9", "hi"}, "", 2, "send: thread {T} has no run 9 (it has 1 run)"},
				{[]string{"send", "{T}", "--mode", "now", "--run", "1", "hi"}, "", 2, "send: --run names the run a steer or restart is meant for; --mode now sends the message as a run of its own"},
				{[]string{"send", "{T}", "--run", "last", "hi"}, "", 2, `send: --run "last": give a whole number`},
				{[]string{"send", "thr_nope", "hi"}, "", 2, `not found: thread "thr_nope"`},
				{[]string{"send", "{T}", "--provider", "nosuch", "hi"}, "", 2, `send: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"send", "{T}", "--provider", "codex", "--on-limit", "switch:nosuch", "hi"}, "", 2, `send: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"send", "{T}", "--max-probes", "x", "hi"}, "", 2, `send: --max-probes "x": give a whole number`},
				// the other verbs
				{[]string{"threads", "--limit", "-1"}, "", 2, "threads: --limit must be a count of threads (0: all), got -1"},
				{[]string{"threads", "--limit", "all"}, "", 2, `threads: --limit "all": give a whole number`},
				{[]string{"show", "thr_nope"}, "", 2, `not found: thread "thr_nope"`},
				{[]string{"show", "--handoff", "hof_nope", "{T}"}, "", 2, `show: thread {T} has no handoff "hof_nope"`},
				{[]string{"watch", "--after", "latest", "{T}"}, "", 2, `watch: --after "latest": give a whole number from 0`},
				{[]string{"watch", "thr_nope"}, "", 2, `not found: thread "thr_nope"`},
				{[]string{"interrupt", "{T}"}, "", 1, ""},
				{[]string{"interrupt", "thr_nope"}, "", 2, ""},
				{[]string{"cancel", "{T}"}, "", 2, "cancel: say what to drop: --queued (every queued run) or --run N (one queued run); to stop the active run, use baton interrupt {T}"},
				{[]string{"cancel", "{T}", "--run", "9"}, "", 2, "cancel: thread {T} has no run 9 (it has 1 run)"},
				{[]string{"cancel", "{T}", "--queued", "--run", "1"}, "", 2, "cancel: give --queued or --run N, not both"},
				{[]string{"approve", "req_nope"}, "", 2, `not found: request "req_nope" is on no thread with a live provider session`},
				{[]string{"decline", "--cancel", "req_nope"}, "", 2, `not found: request "req_nope" is on no thread with a live provider session`},
				{[]string{"diff", "{T}", "--run", "9"}, "", 2, "not found: run 9 of thread {T} has no checkpoint"},
				{[]string{"diff", "{T}", "--max-bytes", "-1"}, "", 2, "diff: --max-bytes cannot be negative, got -1"},
				{[]string{"rollback", "{T}"}, "", 2, "rollback: --run N is required"},
				{[]string{"rollback", "{T}", "--run", "9"}, "", 2, "not found: thread {T} has no checkpoint of run 9"},
				{[]string{"switch", "{T}"}, "", 2, "switch: give --provider (or --agent, --model, --provider-command, --handoff-max-bytes)"},
				{[]string{"switch", "{T}", "--provider", "nosuch"}, "", 2, `switch: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"switch", "{T}", "--handoff-max-bytes", "10"}, "", 2, "switch: --handoff-max-bytes must be at least 4096, got 10"},
				{[]string{"serve", "--listen", "localhost:7077"}, "", 2, `serve: listen "localhost:7077": want unix:///PATH or tcp://HOST:PORT`},
				{[]string{"serve", "--idle-timeout", "-1m"}, "", 2, "serve: --idle-timeout must be a duration from 0 (never), got -1m0s"},
				{[]string{"serve", "--max-subscribers", "0"}, "", 2, "serve: --max-subscribers must be at least 1, got 0"},
				{[]string{"serve", "--keepalive", "100ms"}, "", 2, "serve: --keepalive must be at least 1s (gRPC pings no more often), got 100ms"},
				{[]string{"serve", "--connection-idle-timeout", "-1s"}, "", 2, "serve: --connection-idle-timeout must be a duration from 0 (never), got -1s"},
				{[]string{"serve", "--slow-subscriber", "0s"}, "", 2, "serve: --slow-subscriber must be a duration above 0, got 0s"},
				{[]string{"serve", "--listen", "tcp://192.0.2.1:7077"}, "", 2, "serve: listen tcp://192.0.2.1:7077: an address other than loopback needs TLS (a certificate and key)"},
				{[]string{"serve", "--listen", "unix://" + longSock}, "", 2, fmt.Sprintf("serve: listen %q: the socket path %s is %d bytes; a unix socket's path holds at most %d bytes here: give --listen unix:///A/SHORTER/PATH",
					"unix://"+longSock, longSock, len(longSock), service.MaxSocketPath)},
				{[]string{"serve", "--data", longData}, "", 2, fmt.Sprintf("serve: the socket path %s/baton.sock is %d bytes; a unix socket's path holds at most %d bytes here: give --listen unix:///A/SHORTER/PATH (the service then has no socket in the data dir: reach it with --server), or a shorter --data",
					longData, len(longData)+len("/baton.sock"), service.MaxSocketPath)},
				{[]string{"threads", "--log-level", "loud"}, "", 2, `threads: --log-level must be trace, debug, info, warn, error or off, got "loud"`},
				{[]string{"threads", "--server", "unix://" + dir + "/none.sock"}, "", 1, "server unix://" + dir + "/none.sock does not answer: connect: no such file or directory; start baton serve there, or leave out --server for a host of this command's own"},
				{[]string{"threads", "--server", "unix://" + dir + "/none.sock", "--tls"}, "", 2, "server unix://" + dir + "/none.sock: TLS is for tcp:// addresses, not unix sockets"},
				{[]string{"threads", "--server", dir + "/" + strings.Repeat("s", service.MaxSocketPath)}, "", 2,
					fmt.Sprintf("server %q: the socket path %s/%s is %d bytes; a unix socket's path holds at most %d bytes here",
						dir+"/"+strings.Repeat("s", service.MaxSocketPath), dir, strings.Repeat("s", service.MaxSocketPath), len(dir)+1+service.MaxSocketPath, service.MaxSocketPath)},
				{[]string{"threads", "--data", file}, "", 2, "--data " + file + " is a file, not a directory; give a directory for the data (it is made if missing)"},
				{[]string{"threads", "--data", filepath.Join(file, "sub")}, "", 2, "--data " + filepath.Join(file, "sub") + " lies under " + file + ", a file, not a directory; give a directory for the data (it is made if missing)"},
			} {
				args := make([]string, len(tc.args))
				for i, a := range tc.args {
					args[i] = strings.ReplaceAll(a, "{T}", thread)
				}
				want := strings.ReplaceAll(tc.want, "{T}", thread)
				name := fmt.Sprintf("%.120q", args)
				before := snapshot()
				env := append(os.Environ(), "BATON_DATA="+data)
				out, errOut, code := execBaton(t, env, tc.stdin, args...)
				errLines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
				if host == "embedded" && args[0] == "send" && errLines[0] == "baton: no service runs (baton serve); following the run to its end" {
					errLines = errLines[1:] // send says it follows the run, then refuses it
				}
				switch {
				case code != tc.code:
					t.Errorf("baton %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", name, code, tc.code, out, errOut)
				case want != "" && (len(errLines) != 1 || errLines[0] != "baton: "+want):
					t.Errorf("baton %s: stderr\n%s\nwant\nbaton: %s", name, errOut, want)
				case want == "" && (len(errLines) != 1 || !strings.HasPrefix(errLines[0], "baton: ")):
					t.Errorf("baton %s: stderr is not one line of baton's:\n%s", name, errOut)
				case goInternals.MatchString(errOut):
					t.Errorf("baton %s: Go's words on stderr:\n%s", name, errOut)
				case out != "":
					t.Errorf("baton %s: printed on stdout:\n%s", name, out)
				}
				if d := cmp.Diff(before, snapshot()); d != "" {
					t.Errorf("baton %s changed the store (-before +after):\n%.3000s", name, d)
				}
				if _, err := os.Stat(longData); err == nil {
					t.Fatalf("baton %s made the data dir %s", name, longData)
				}
			}
		})
	}
}

// anyPrompt is the replay peer's command for a copy of a transcript
// under testdata whose prompts take any text (promptsAnyText), with a
// cursor file, so that a provider started again goes on where the last
// one ended.
func anyPrompt(t *testing.T, transcript string) string {
	t.Helper()
	dir := t.TempDir()
	path := promptsAnyText(t, filepath.Join(root, "testdata", transcript), dir)
	return fmt.Sprintf("'%s' --transcript '%s' --speed 0 --state '%s'", filepath.Join(binDir, "replaypeer"), path, filepath.Join(dir, "cursor"))
}

// allPromptsSent are the texts of the prompts the ACP plugin sent its
// provider, in the data dir's raw-frame logs (promptsSent): what the
// agent was told.
func allPromptsSent(t *testing.T, data string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(data, "rawframes", "*.ndjson*"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no raw-frame logs in %s: %v", data, err)
	}
	var sent []string
	for _, l := range logs {
		sent = append(sent, promptsSent(t, l)...)
	}
	return sent
}

// runInputs are a thread's runs' ordinals, statuses and inputs, as baton
// show --json says them.
func runInputs(t *testing.T, data, thread string) []string {
	t.Helper()
	var got []string
	for _, r := range showJSON(t, data, thread).Runs {
		got = append(got, fmt.Sprintf("%d %s %q", r.Ordinal, r.Status, r.Input))
	}
	return got
}

// A message that is long or spans lines comes from a file (--file) or
// from stdin (-), on run and send, and reaches the provider as it was
// written: every byte, its lines and their ends.
func TestMessagesFromFilesAndStdin(t *testing.T) {
	all := []string{
		"First line\n\tindented — ünïcödé ✓\n\n  last line, no newline at its end",
		"from stdin\r\nline 2 ends in CRLF\r\n\n",
		"a third, from --file on a thread that goes on\n",
	}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			texts, peer := all, ""
			if host == "service" {
				startServe(t, data)
				peer = anyPrompt(t, "acp/multi_turn.ndjson") // one provider process for the three turns
			} else {
				peer = anyPrompt(t, "acp/resume.ndjson") // each command starts the provider again: it resumes
				texts = texts[:2]
			}
			files := make([]string, len(texts))
			for i, text := range texts {
				files[i] = filepath.Join(t.TempDir(), fmt.Sprintf("message%d.txt", i+1))
				if err := os.WriteFile(files[i], []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, errOut, code := baton(t, "run", "--data", data, "--cwd", t.TempDir(), "--provider", "acp", "--provider-command", peer, "--file", files[0])
			if code != exitOK {
				t.Fatalf("run --file: exit %d\n%s\n%s", code, out, errOut)
			}
			thread := threadOf(t, out)
			out, errOut, code = batonIn(t, texts[1], "send", "--data", data, thread, "-")
			if code != exitOK {
				t.Fatalf("send -: exit %d\n%s\n%s", code, out, errOut)
			}
			if host == "service" {
				// send returned at once; the next run queues behind its run
				// and is followed to its end.
				out, errOut, code = baton(t, "run", "--data", data, "--thread", thread, "--file", files[2])
				if code != exitOK {
					t.Fatalf("run --thread --file: exit %d\n%s\n%s", code, out, errOut)
				}
			}
			var want []string
			for i, text := range texts {
				want = append(want, fmt.Sprintf("%d completed %q", i+1, text))
			}
			if d := cmp.Diff(want, runInputs(t, data, thread)); d != "" {
				t.Errorf("the runs (-want +got):\n%s", d)
			}
			sent := allPromptsSent(t, data)
			slices.Sort(sent)
			wantSent := slices.Sorted(slices.Values(texts))
			if d := cmp.Diff(wantSent, sent); d != "" {
				t.Errorf("the prompts the provider was sent (-want +got):\n%s", d)
			}
		})
	}
}

// pastedLog is a log of exactly n bytes: lines of text, as a user pastes
// one.
func pastedLog(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "2026-12-02T10:%02d:%02d.%06dZ INFO worker %d: processed batch %d in %dms\n", i/60%60, i%60, i, i%8, i, i%997)
	}
	return b.String()[:n]
}

// A message of exactly the limit (a pasted log of 16 MiB) goes through:
// the CLI, the service's gRPC (the embedded host's in-process connection,
// or baton serve's unix socket), the domain, the store, the plugin's gRPC
// and the provider's stdin, and the run completes with it as its input.
// One byte more is refused naming the limit, by the CLI and by the API
// (gRPC's own bound would say "received message larger than max"), and
// nothing is written.
func TestMessageAtTheLimit(t *testing.T) {
	text := pastedLog(domain.MaxMessageBytes)
	file := filepath.Join(t.TempDir(), "pasted.log")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	over := filepath.Join(t.TempDir(), "over.log")
	if err := os.WriteFile(over, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			if host == "service" {
				startServe(t, data)
			}
			out, errOut, code := baton(t, "run", "--data", data, "--cwd", t.TempDir(), "--provider", "acp",
				"--provider-command", anyPrompt(t, "acp/simple.ndjson"), "--file", file)
			if code != exitOK {
				t.Fatalf("run --file (16 MiB): exit %d\n%.2000s\n%.2000s", code, out, errOut)
			}
			thread := threadOf(t, out)
			th := showJSON(t, data, thread)
			if len(th.Runs) != 1 || th.Runs[0].Status != domain.RunStatusCompleted || th.Runs[0].Input != text {
				t.Fatalf("the run of 16 MiB: %d runs; want one completed with the whole message", len(th.Runs))
			}
			snapshot := func() string {
				t.Helper()
				out, errOut, code := baton(t, "threads", "--json", "--data", data)
				if code != exitOK {
					t.Fatalf("threads: exit %d\n%s", code, errOut)
				}
				return out // each thread's sequence: a write moves it
			}
			before := snapshot()
			_, errOut, code = baton(t, "send", "--data", data, thread, "--file", over)
			if want := "baton: send: --file " + over + " is 16777217 bytes; the limit is 16 MiB\n"; code != exitUsage || errOut != want {
				t.Errorf("send --file (16 MiB and a byte): exit %d, %q; want exit 2, %q", code, errOut, want)
			}
			if host == "service" {
				// An API client that sends it is told the limit too.
				conn, err := service.Dial(t.Context(), filepath.Join(data, "baton.sock"), service.DialOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_, err = batonv1.NewBatonClient(conn).SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: thread, Text: text + "\n"})
				if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != "text: the message is 16777217 bytes; the limit is 16 MiB" {
					t.Errorf("SendMessage of 16 MiB and a byte: %.300v; want InvalidArgument naming the limit", err)
				}
			}
			if after := snapshot(); after != before {
				t.Errorf("a refused message changed the threads:\n%s\n%s", before, after)
			}
		})
	}
}

// envVerb is a verb of the environment's test: its words, the arguments
// it is run with ({T} is the thread; each refuses, or only reads), the
// variables its help documents beyond the global ones (so the variables
// that set its flags), and those of them its run here cannot show
// (documented, set, but not observable with these arguments), with why.
type envVerb struct {
	words      string
	args       []string
	documented []string
	quiet      map[string]string
}

// globalVars are the variables of the flags every verb has.
var globalVars = []string{"BATON_DATA", "BATON_SERVER", "BATON_TOKEN_FILE", "BATON_TLS", "BATON_CA_FILE", "BATON_LOG_LEVEL",
	"BATON_PLUGIN_DIR", "BATON_RAW_FRAMES", "BATON_RAW_FRAMES_MAX_BYTES", "BATON_RAW_FRAMES_MAX_AGE", "BATON_GRACE",
	"BATON_TURN_STALL_TIMEOUT", "BATON_REQUEST_TIMEOUT"}

// policyVars are the continuation policy's variables: a new thread's.
var policyVars = []string{"BATON_ON_LIMIT", "BATON_CONTINUE_TEXT", "BATON_UNTIL", "BATON_CHECK_TIMEOUT", "BATON_MAX_RUNS",
	"BATON_MAX_HOURS", "BATON_MAX_TOKENS", "BATON_MAX_WAIT", "BATON_MAX_PROBES", "BATON_PROBE_INTERVAL", "BATON_PROBE_FACTOR",
	"BATON_PROBE_CEILING"}

// worktreeVars are the variables of a new thread's worktree, beside
// BATON_WORKTREE's: taken only with --worktree.
var worktreeVars = []string{"BATON_BRANCH", "BATON_BASE", "BATON_WORKTREE_DIR", "BATON_COPY", "BATON_SETUP", "BATON_AUTHOR"}

// quietly are documented variables a verb's run in the test cannot show,
// each with why.
func quietly(why string, names ...string) map[string]string {
	m := map[string]string{}
	for _, n := range names {
		m[n] = why
	}
	return m
}

// and is the union of quiet sets.
func and(sets ...map[string]string) map[string]string {
	m := map[string]string{}
	for _, s := range sets {
		for k, v := range s {
			m[k] = v
		}
	}
	return m
}

var (
	reachesNoHost = quietly("it reaches no host with these arguments", "BATON_DATA", "BATON_SERVER", "BATON_TOKEN_FILE", "BATON_CA_FILE",
		"BATON_PLUGIN_DIR")
	dialsNothing = quietly("it dials no service", "BATON_SERVER", "BATON_TOKEN_FILE", "BATON_CA_FILE")
	noPlugin     = quietly("it starts and checks no plugin", "BATON_PLUGIN_DIR")
)

var envCases = []envVerb{
	{"run", []string{"run", "--provider", "nosuch", "Say hello."},
		append([]string{"BATON_PROVIDER", "BATON_AGENT", "BATON_MODEL", "BATON_PROVIDER_COMMAND", "BATON_HANDOFF_MAX_BYTES", "BATON_CWD", "BATON_THREAD",
			"BATON_JSON", "BATON_APPROVE", "BATON_SCRIPT", "BATON_DETACH", "BATON_FILE", "BATON_WORKTREE", "BATON_SHARED_CWD", "BATON_ON_HOST"}, append(policyVars, worktreeVars...)...),
		and(noPlugin, quietly("--provider is given", "BATON_PROVIDER"), quietly("no thread is made", "BATON_MODEL", "BATON_CWD", "BATON_ON_HOST"),
			quietly("they apply with --worktree only", worktreeVars...))},
	{"threads", []string{"threads", "--json"}, []string{"BATON_JSON", "BATON_STATUS", "BATON_LIMIT", "BATON_OUTPUT", "BATON_ALL"},
		and(noPlugin, quietly("--json is given", "BATON_JSON"))},
	{"show", []string{"show", "{T}"}, []string{"BATON_JSON", "BATON_HANDOFF"}, noPlugin},
	{"watch", []string{"watch", "{T}"}, []string{"BATON_JSON"}, noPlugin},
	{"send", []string{"send", "{T}", "--mode", "steer", "hi"}, []string{"BATON_MODE", "BATON_RUN", "BATON_FILE"},
		and(noPlugin, quietly("--mode is given", "BATON_MODE"))},
	{"interrupt", []string{"interrupt", "{T}"}, []string{"BATON_RUN"}, noPlugin},
	{"cancel", []string{"cancel", "{T}", "--queued"}, []string{"BATON_QUEUED", "BATON_RUN"},
		and(noPlugin, quietly("--queued is given", "BATON_QUEUED"))},
	{"approve", []string{"approve", "req_nope"}, []string{"BATON_FOR_SESSION", "BATON_ANSWER"},
		and(noPlugin, quietly("the request is not found whatever the answer", "BATON_ANSWER"))},
	{"decline", []string{"decline", "req_nope"}, []string{"BATON_CANCEL"}, noPlugin},
	{"diff", []string{"diff", "{T}"}, []string{"BATON_RUN", "BATON_MAX_BYTES"}, noPlugin},
	{"rollback", []string{"rollback", "{T}"}, []string{"BATON_RUN"}, reachesNoHost},
	{"switch", []string{"switch", "{T}"}, nil, reachesNoHost},
	{"plugin list", []string{"plugin", "list"}, []string{"BATON_MARKDOWN", "BATON_JSON"},
		and(quietly("it lists this machine's plugins (only --markdown asks a service)", "BATON_SERVER", "BATON_TOKEN_FILE", "BATON_CA_FILE"),
			quietly("DATA/plugins is not there either way, and the ghost's binary is not", "BATON_DATA", "BATON_PLUGIN_DIR"))},
	{"plugin install", []string{"plugin", "install", "mine", "{DIR}/none"}, []string{"BATON_NAME", "BATON_DIR"},
		and(reachesNoHost, quietly("the missing file is refused first", "BATON_DIR"))},
	{"plugin verify", []string{"plugin", "verify"}, nil, and(dialsNothing, quietly("DATA/plugins is not there either way", "BATON_DATA"))},
	{"plugin upgrade", []string{"plugin", "upgrade", "nosuch"}, []string{"BATON_DIR"}, and(dialsNothing, noPlugin)},
	{"plugin remove", []string{"plugin", "remove", "nosuch"}, []string{"BATON_DIR"}, and(dialsNothing, noPlugin)},
	{"plugin lock", []string{"plugin", "lock", "{DIR}/none"}, nil, reachesNoHost},
	{"serve", []string{"serve", "--data", "{OPEN}"}, []string{"BATON_LISTEN", "BATON_TLS_CERT", "BATON_TLS_KEY", "BATON_IDLE_TIMEOUT", "BATON_LOG_FORMAT",
		"BATON_MAX_CONNECTIONS", "BATON_MAX_STREAMS", "BATON_CONNECTION_IDLE_TIMEOUT", "BATON_KEEPALIVE", "BATON_KEEPALIVE_TIMEOUT",
		"BATON_MAX_SUBSCRIBERS", "BATON_MAX_THREAD_SUBSCRIBERS", "BATON_SUBSCRIBER_BUFFER", "BATON_SLOW_SUBSCRIBER",
		"BATON_NOTIFY", "BATON_NOTIFY_SECRET_FILE", "BATON_STORE", "BATON_NATS_CREDS", "BATON_NATS_TOKEN_FILE", "BATON_NATS_TLS_CA",
		"BATON_NATS_TLS_CERT", "BATON_NATS_TLS_KEY", "BATON_NATS_REPLICAS", "BATON_INSTALLATION", "BATON_HOST", "BATON_LEASE_TTL"},
		and(dialsNothing, noPlugin, quietly("--data is given", "BATON_DATA"))},
	{"notify list", []string{"notify", "list"}, []string{"BATON_JSON"}, and(dialsNothing, noPlugin)},
	{"doctor", []string{"doctor"}, []string{"BATON_REBUILD", "BATON_PRUNE"}, and(dialsNothing, noPlugin)},
	{"version", []string{"version"}, nil, reachesNoHost},
	{"agents list", []string{"agents", "list", "--registry", "{DIR}/none"}, []string{"BATON_REGISTRY", "BATON_JSON"},
		and(reachesNoHost, quietly("--registry is given", "BATON_REGISTRY"))},
	{"completion bash", []string{"completion", "bash"}, []string{"BATON_NO_DESCRIPTIONS"}, reachesNoHost},
}

// hostile is a value for each flag's variable that changes what a verb
// does wherever the variable applies: a value the flag refuses, or one
// the verb refuses or shows.
var hostile = map[string]string{
	"BATON_DATA": "{FILE}/data", "BATON_SERVER": "unix:///nonexistent/baton.sock", "BATON_TOKEN_FILE": "/nonexistent/token",
	"BATON_TLS": "maybe", "BATON_CA_FILE": "/nonexistent/ca.pem", "BATON_LOG_LEVEL": "loud", "BATON_PLUGIN_DIR": "{GHOST}",
	"BATON_RAW_FRAMES": "maybe", "BATON_RAW_FRAMES_MAX_BYTES": "lots", "BATON_RAW_FRAMES_MAX_AGE": "soon",
	"BATON_PROVIDER": "nosuch", "BATON_AGENT": "nosuch", "BATON_REGISTRY": "{DIR}/none", "BATON_MODEL": "gpt-hostile", "BATON_PROVIDER_COMMAND": "'unclosed", "BATON_HANDOFF_MAX_BYTES": "10",
	"BATON_CWD": "{DIR}/none", "BATON_THREAD": "thr_nope", "BATON_JSON": "maybe", "BATON_APPROVE": "maybe", "BATON_SCRIPT": "{DIR}/none",
	"BATON_DETACH": "maybe", "BATON_SHARED_CWD": "maybe", "BATON_ON_HOST": "elsewhere", "BATON_FILE": "{DIR}/none", "BATON_ON_LIMIT": "later", "BATON_CONTINUE_TEXT": " ", "BATON_UNTIL": " ",
	"BATON_CHECK_TIMEOUT": "x", "BATON_MAX_RUNS": "x", "BATON_MAX_HOURS": "x", "BATON_MAX_TOKENS": "x", "BATON_MAX_WAIT": "x",
	"BATON_MAX_PROBES": "x", "BATON_PROBE_INTERVAL": "x", "BATON_PROBE_FACTOR": "x", "BATON_PROBE_CEILING": "x",
	"BATON_STATUS": "running", "BATON_LIMIT": "x", "BATON_AFTER": "thr_zzzz", "BATON_HANDOFF": "hof_nope", "BATON_MODE": "sideways",
	"BATON_RUN": "run_nope", "BATON_QUEUED": "maybe", "BATON_FOR_SESSION": "maybe", "BATON_CANCEL": "maybe", "BATON_MAX_BYTES": "x",
	"BATON_MARKDOWN": "maybe", "BATON_NAME": "Bad Name", "BATON_DIR": "{DIR}/none", "BATON_LISTEN": "bogus",
	"BATON_TLS_CERT": "{DIR}/cert.pem", "BATON_TLS_KEY": "{DIR}/key.pem", "BATON_IDLE_TIMEOUT": "x", "BATON_LOG_FORMAT": "bogus",
	"BATON_REBUILD": "maybe", "BATON_NO_DESCRIPTIONS": "maybe", "BATON_GRACE": "soon", "BATON_OUTPUT": "yaml", "BATON_FORCE": "maybe", "BATON_MCP": "nosuch", "BATON_NO_MCP": "maybe",
	"BATON_ANSWER": "Q=A", "BATON_MAX_CONNECTIONS": "0", "BATON_MAX_STREAMS": "x", "BATON_CONNECTION_IDLE_TIMEOUT": "-1s", "BATON_KEEPALIVE": "10ms",
	"BATON_KEEPALIVE_TIMEOUT": "0s", "BATON_MAX_SUBSCRIBERS": "0", "BATON_MAX_THREAD_SUBSCRIBERS": "x", "BATON_SUBSCRIBER_BUFFER": "-1",
	"BATON_SLOW_SUBSCRIBER": "x", "BATON_WORKTREE": "maybe", "BATON_BRANCH": "b", "BATON_BASE": "nope", "BATON_WORKTREE_DIR": "{DIR}/none",
	"BATON_COPY": "/abs", "BATON_SETUP": "false", "BATON_AUTHOR": "nobody",
	"BATON_PRUNE": "maybe", "BATON_ALL": "maybe", "BATON_TURN_STALL_TIMEOUT": "later", "BATON_REQUEST_TIMEOUT": "later",
	"BATON_NOTIFY": "ftp://x/y", "BATON_NOTIFY_SECRET_FILE": "{DIR}/none",
	"BATON_STORE": "bogus", "BATON_NATS_CREDS": "{DIR}/none", "BATON_NATS_TOKEN_FILE": "{DIR}/none", "BATON_NATS_TLS_CA": "{DIR}/none",
	"BATON_NATS_TLS_CERT": "{DIR}/none", "BATON_NATS_TLS_KEY": "{DIR}/none", "BATON_NATS_REPLICAS": "x", "BATON_INSTALLATION": "a.b",
	"BATON_HOST": "a b", "BATON_LEASE_TTL": "x",
}

// helpFlag is a flag's line in help, with its name; helpVar a variable
// named in it.
var (
	helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z-]*)\b.*$`)
	helpVar  = regexp.MustCompile(`\[\$(BATON_[A-Z_]+)\]`)
)

// flagsOf reads a verb's help: every variable of its flags, and the
// variables its help shows.
func flagsOf(t *testing.T, words string) (all, shown []string) {
	t.Helper()
	out, errOut, code := baton(t, append(strings.Fields(words), "--help")...)
	if code != exitOK {
		t.Fatalf("baton %s --help: exit %d\n%s", words, code, errOut)
	}
	for _, m := range helpFlag.FindAllStringSubmatch(out, -1) {
		if m[1] == "help" || m[1] == "version" {
			continue
		}
		all = append(all, envName(m[1]))
		if v := helpVar.FindStringSubmatch(m[0]); v != nil {
			if v[1] != envName(m[1]) {
				t.Errorf("baton %s --help: --%s says $%s", words, m[1], v[1])
			}
			shown = append(shown, v[1])
		}
	}
	slices.Sort(all)
	slices.Sort(shown)
	return all, shown
}

// Each BATON_ variable sets its flag on the verbs where the flag means
// what the variable documents, and on no other: for every verb and every
// variable of its flags, the help shows the variable exactly where it
// applies, and a value that would change what the verb does changes it
// there, and nowhere else (output, exit and store as without it).
func TestEnvironmentIsScoped(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	ghost := filepath.Join(dir, "ghost")
	open := filepath.Join(dir, "open")
	for _, d := range []string{ghost, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o755); err != nil { // serve refuses it: it never serves here
		t.Fatal(err)
	}
	for p, b := range map[string]string{file: "", filepath.Join(ghost, "plugins.lock"): `{"plugins":{"ghost":{"file":"baton-plugin-ghost","sha256":"00"}}}`} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fill := strings.NewReplacer("{DIR}", dir, "{FILE}", file, "{GHOST}", ghost, "{OPEN}", open)

	// The help: each verb's flags, and the variables it shows.
	flags := map[string][]string{}
	for _, v := range envCases {
		all, shown := flagsOf(t, v.words)
		want := slices.Sorted(slices.Values(append(slices.Clone(globalVars), v.documented...)))
		if d := cmp.Diff(want, shown); d != "" {
			t.Errorf("baton %s --help: the variables shown (-documented +shown):\n%s", v.words, d)
		}
		for _, name := range all {
			if _, ok := hostile[name]; !ok {
				t.Errorf("baton %s: no hostile value for %s: add one", v.words, name)
			}
		}
		flags[v.words] = all
	}

	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			data, thread, snapshot := aThreadOn(t, host)
			for _, v := range envCases {
				args := make([]string, len(v.args))
				for i, a := range v.args {
					args[i] = strings.ReplaceAll(fill.Replace(a), "{T}", thread)
				}
				base := []string{"BATON_DATA=" + data}
				want := runEnv(t, base, args)
				for _, name := range flags[v.words] {
					value := fill.Replace(hostile[name])
					before := snapshot()
					got := runEnv(t, append(slices.Clone(base), name+"="+value), args)
					wrote := cmp.Diff(before, snapshot()) != ""
					changed := got != want || wrote
					documented := slices.Contains(globalVars, name) || slices.Contains(v.documented, name)
					why, quiet := v.quiet[name]
					if !quiet && host == "embedded" && (name == "BATON_TOKEN_FILE" || name == "BATON_CA_FILE") {
						why, quiet = "an embedded host dials no socket", true
					}
					switch {
					case !documented && changed:
						t.Errorf("%s=%q changed baton %s, where the variable does not apply (wrote: %v):\nwithout: %s\nwith:    %s",
							name, value, v.words, wrote, want, got)
					case documented && quiet && changed:
						t.Errorf("%s=%q changed baton %s, which the test says it cannot (%s): the test is out of date\nwithout: %s\nwith:    %s",
							name, value, v.words, why, want, got)
					case documented && !quiet && !changed:
						t.Errorf("%s=%q did not change baton %s, where its help says it applies:\n%s", name, value, v.words, got)
					case goInternals.MatchString(got):
						t.Errorf("%s=%q: baton %s says Go's words:\n%s", name, value, v.words, got)
					}
				}
			}
		})
	}
}

// runEnv runs baton with exactly these BATON_ variables and says what it
// did: its exit, stdout and stderr. watch, which follows a thread until
// Ctrl-C, gets one once it has printed its first line.
func runEnv(t *testing.T, env []string, args []string) string {
	t.Helper()
	if args[0] != "watch" {
		out, errOut, code := batonEnv(t, env, "", args...)
		return fmt.Sprintf("exit %d\nstdout: %.300q\nstderr: %.300q", code, out, errOut)
	}
	var all []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			all = append(all, kv)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "baton"), args...)
	cmd.Env = append(all, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	first, _ := r.ReadString('\n') // the header, or nothing when it refused
	if first != "" {
		cmd.Process.Signal(syscall.SIGINT)
	}
	rest, _ := io.ReadAll(r)
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return fmt.Sprintf("exit %d\nstdout: %.300q\nstderr: %.300q", code, first+string(rest), errb.String())
}

// send --run is a run ordinal, as on diff, rollback and cancel: the
// active run a restart (or steer) is meant for. A run that is not the
// active one, or that the thread does not have, is refused naming it.
func TestSendRunIsAnOrdinal(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	startServe(t, data)
	conn, err := service.Dial(t.Context(), filepath.Join(data, "baton.sock"), service.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := batonv1.NewBatonClient(conn)
	thread := createThread(t, c, "acp/stall.ndjson", "decline") // the agent thinks, and says nothing more
	events, _ := subscribe(t.Context(), t, c, thread, 0)
	send := func(args ...string) (string, string, int) {
		t.Helper()
		return baton(t, append([]string{"send", "--data", data, thread}, args...)...)
	}
	if out, errOut, code := send("Take your time"); code != exitOK {
		t.Fatalf("send: exit %d\n%s\n%s", code, out, errOut)
	}
	until(t, events, "the turn to start", thinking)
	if out, errOut, code := send("--mode", "queue", "Then this"); code != exitOK {
		t.Fatalf("send --mode queue: exit %d\n%s\n%s", code, out, errOut)
	}
	runs := showJSON(t, data, thread).Runs
	if len(runs) != 2 || runs[0].Status != domain.RunStatusRunning || runs[1].Status != domain.RunStatusQueued {
		t.Fatalf("runs: %+v; want run 1 running, run 2 queued", runs)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--mode", "restart", "--run", "2", "Now this"}, exitFailed,
			"baton: send: run 2 of thread " + thread + " is queued, not the active run (run 1 is); --run names the run a steer or restart is meant for\n"},
		{[]string{"--mode", "restart", "--run", "3", "Now this"}, exitUsage, "baton: send: thread " + thread + " has no run 3 (it has 2 runs)\n"},
		{[]string{"--mode", "restart", "--run", runs[0].ID, "Now this"}, exitUsage, `baton: send: --run "` + runs[0].ID + `": give a whole number` + "\n"},
	} {
		if out, errOut, code := send(tc.args...); code != tc.code || errOut != tc.want || out != "" {
			t.Errorf("send %q: exit %d, %q, %q; want exit %d, %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
	out, errOut, code := send("--mode", "restart", "--run", "1", "Now this")
	if code != exitOK || !strings.HasPrefix(out, "sent to thread "+thread+" (run "+runs[0].ID+",") {
		t.Fatalf("send --mode restart --run 1: exit %d\n%s\n%s", code, out, errOut)
	}
	got := until(t, events, "the restart", ofType("run.restart.requested"))
	var restart domain.RestartRequested
	if err := json.Unmarshal([]byte(got[len(got)-1].Data), &restart); err != nil {
		t.Fatal(err)
	}
	if restart.RunID != runs[0].ID || restart.Text != "Now this" {
		t.Errorf("the restart: %+v; want run 1 (%s) restarted with %q", restart, runs[0].ID, "Now this")
	}
}
