//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
				{[]string{"switch", "{T}"}, "", 2, "switch: give --provider (or --model, --provider-command, --handoff-max-bytes)"},
				{[]string{"switch", "{T}", "--provider", "nosuch"}, "", 2, `switch: provider "nosuch" is not installed; installed: acp, claude, codex, cursor, opencode`},
				{[]string{"switch", "{T}", "--handoff-max-bytes", "10"}, "", 2, "switch: --handoff-max-bytes must be at least 4096, got 10"},
				{[]string{"serve", "--listen", "localhost:7077"}, "", 2, `serve: listen "localhost:7077": want unix:///PATH or tcp://HOST:PORT`},
				{[]string{"serve", "--idle-timeout", "-1m"}, "", 2, "serve: --idle-timeout must be a duration from 0 (never), got -1m0s"},
				{[]string{"threads", "--log-level", "loud"}, "", 2, `threads: --log-level must be trace, debug, info, warn or error, got "loud"`},
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
