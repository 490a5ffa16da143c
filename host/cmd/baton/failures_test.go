package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

// brokenProvider is how each plugin's provider is played broken: its
// recorded (or authored) simple transcript up to where its turn has
// started, then what a broken provider does there.
type brokenProvider struct {
	name     string
	cutAfter string // the label of the entry the turn has started at
	message  string // the turn's prompt, as the transcript has it
	who      string // how a report names the provider
	protocol string // what it prints frames in: ", not <protocol>"
	// diagTitle and diag are the diagnostic the plugin makes of a line
	// "garbage N" that is not a frame.
	diagTitle string
	diag      func(n int) string
	// perTurn says the provider is a process per turn: its death ends the
	// turn, not the session.
	perTurn bool
}

var brokenProviders = []brokenProvider{
	{"acp", "6.session/prompt", "Say hello.", "the agent", "JSON-RPC", "malformed frame", notJSON, false},
	{"claude", "5.command_lifecycle", "Say hello", "claude", "stream-json", "malformed frame",
		func(int) string { return "not a claude frame: invalid character 'g' looking for beginning of value" }, false},
	{"codex", "12.turn/started", "Say hello", "codex", "JSON-RPC", "malformed frame", notJSON, false},
	// cursor names its CLI by the command's base name.
	{"cursor", "2.system/init", "Write hello.txt saying hello, then tell me you did.", "replaypeer", "stream-json", "malformed frame", notJSON, true},
	// opencode's stdout is a log, not frames: what it prints there is
	// quoted, and the garbage on its event stream is a diagnostic.
	{"opencode", "13.response 204", "Say hello", "opencode", "", "malformed event",
		func(n int) string {
			return fmt.Sprintf(`event is not a JSON object (invalid character 'g' looking for beginning of value): "garbage %d"`, n)
		}, false},
}

func notJSON(n int) string { return fmt.Sprintf(`not JSON: "garbage %d"`, n) }

// transcript writes p's broken transcript, whose turn ends in the
// entries given (JSON lines), and returns the provider command that plays
// it.
func (p brokenProvider) transcript(t *testing.T, entries ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "testdata", p.name, "simple.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		out = append(out, l)
		if strings.Contains(l, `"label":"`+p.cutAfter+`"`) {
			break
		}
	}
	out[0] = strings.Replace(out[0], `"scenario":"simple"`, `"scenario":"broken"`, 1)
	file := filepath.Join(t.TempDir(), "broken.ndjson")
	if err := os.WriteFile(file, []byte(strings.Join(out, "")+strings.Join(entries, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("'%s' --transcript '%s' --speed 0 %s", filepath.Join(binDir, "replaypeer"), file, strings.Join(replay.PeerArgs(tr), " "))
}

// garbage is an entry that prints "garbage <n>", times times, where p's
// frames come: stdout, and for an HTTP provider its event stream too.
func (p brokenProvider) garbage(times int) []string {
	if p.name == "opencode" {
		return []string{
			fmt.Sprintf(`{"type":"emit_inbound","label":"garbage","frame":{"stdout":"garbage <n>"},"repeat":%d}`, times),
			fmt.Sprintf(`{"type":"emit_inbound","label":"garbage events","raw":"garbage <n>","repeat":%d}`, times),
		}
	}
	return []string{fmt.Sprintf(`{"type":"emit_inbound","label":"garbage","raw":"garbage <n>","repeat":%d}`, times)}
}

// printed are entries that print each of lines where p's frames come.
func (p brokenProvider) printed(lines ...string) []string {
	var out []string
	for _, l := range lines {
		raw, _ := json.Marshal(l)
		if p.name == "opencode" {
			out = append(out, fmt.Sprintf(`{"type":"emit_inbound","label":"printed","frame":{"stdout":%s}}`, raw))
			continue
		}
		out = append(out, fmt.Sprintf(`{"type":"emit_inbound","label":"printed","raw":%s}`, raw))
	}
	return out
}

// not is what a report says a line was not.
func (p brokenProvider) not() string {
	if p.protocol == "" {
		return ""
	}
	return ", not " + p.protocol
}

// runBroken runs p's broken provider through the real baton, embedded or
// against a baton serve on the data dir, and returns its output, its exit
// code, and the host's log at debug level (baton run's stderr, or baton
// serve's once it stopped).
func runBroken(t *testing.T, p brokenProvider, service bool, command string, flags ...string) (stdout, stderr, hostLog string, code int) {
	t.Helper()
	stdout, stderr, hostLog, code, _ = runBrokenIn(t, privateDir(t), p, service, command, flags...)
	return stdout, stderr, hostLog, code
}

// runBrokenIn is runBroken on the data dir data, which it returns.
func runBrokenIn(t *testing.T, data string, p brokenProvider, service bool, command string, flags ...string) (stdout, stderr, hostLog string, code int, _ string) {
	t.Helper()
	var srv *batonService
	if service {
		srv = startService(t, data, "--log-level", "debug")
	} else {
		flags = append([]string{"--log-level", "debug"}, flags...)
	}
	args := append(append([]string{"run"}, flags...), "--data", data, "--cwd", t.TempDir(), "--provider", p.name,
		"--provider-command", command, p.message)
	stdout, stderr, code = baton(t, args...)
	hostLog = stderr
	if srv != nil {
		if err := srv.signal(syscall.SIGTERM); err != nil {
			t.Errorf("baton serve: %v\n%s", err, srv.stderr)
		}
		hostLog = srv.stderr.String()
	}
	return stdout, stderr, hostLog, code, data
}

// hostModes are the two hosts a verb runs on.
var hostModes = []struct {
	name    string
	service bool
}{{"embedded", false}, {"service", true}}

// providerStderr is a line of the host's log that logs the provider's
// stderr: the line it logs, or what it says instead.
var providerStderr = regexp.MustCompile(`provider stderr(?:: (more lines are not logged \([^)]*\))|: .*?(line="[^"]*"))`)

// sessionID is a provider session's id in the stream.
var sessionID = regexp.MustCompile(`ses_[0-9a-f]+`)

// threadLine is the stream's first line, naming its thread.
var threadLine = regexp.MustCompile(`● thread (thr_[0-9a-z]+) `)

// sessionEnds are the end reasons of the provider sessions of the thread a
// run's stream names, as the thread in data holds them.
func sessionEnds(t *testing.T, data, stream string) []string {
	t.Helper()
	m := threadLine.FindStringSubmatch(stream)
	if m == nil {
		t.Fatalf("no thread in the stream:\n%s", stream)
	}
	out, errOut, code := baton(t, "show", "--data", data, "--json", m[1])
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	var th struct {
		ProviderSessions []struct {
			EndReason string `json:"endReason"`
		} `json:"providerSessions"`
	}
	if err := json.Unmarshal([]byte(out), &th); err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	var ends []string
	for _, s := range th.ProviderSessions {
		ends = append(ends, s.EndReason)
	}
	return ends
}

// failureLines are the lines of a readable stream that say how a run and
// its provider session ended, ids left out.
func failureLines(out string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "✖ ") || strings.Contains(l, "(provider session ") && strings.Contains(l, " ended: ") {
			got = append(got, sessionID.ReplaceAllString(l, "ses_…"))
		}
	}
	return got
}

// A provider that dies mid-turn reads the same whatever the plugin: how it
// ended (its exit status, or the signal that killed it), when, the first
// line it printed that was not a frame (and how many more), and the end of
// its stderr; the session's end says the same without the when. Through
// the real baton, embedded and as a service, with each plugin and the
// replay peer playing a provider that prints two lines that are not
// frames (one not JSON, one JSON that is not of its protocol), writes two
// lines on stderr and dies.
func TestProviderDeathReadsTheSame(t *testing.T) {
	for _, p := range brokenProviders {
		for _, end := range []struct{ name, entry, how string }{
			{"status", `{"type":"runtime_exit","status":"error","code":3,"stderr":"warning: a\nfatal: the API key was revoked\n"}`,
				"exited with status 3"},
			{"signal", `{"type":"runtime_exit","status":"error","signal":"SIGKILL","stderr":"warning: a\nfatal: the API key was revoked\n"}`,
				"was killed by SIGKILL"},
		} {
			command := p.transcript(t, append(p.printed("garbage 1", `{"garbage":2}`), end.entry)...)
			for _, m := range hostModes {
				t.Run(p.name+"/"+end.name+"/"+m.name, func(t *testing.T) {
					out, errOut, _, code, data := runBrokenIn(t, privateDir(t), p, m.service, command)
					if code != exitFailed {
						t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, out, errOut)
					}
					why := `it printed "garbage 1"` + p.not() + ", and 1 more line that was not a frame; its stderr ends: warning: a; fatal: the API key was revoked"
					want := []string{fmt.Sprintf("✖ run 1 failed: %s %s during the turn: %s", p.who, end.how, why)}
					if !p.perTurn {
						// The stream shows the session's end when it is recorded
						// before the run's (the provider's turn and its exit
						// are two events, which a loaded host may commit
						// apart); the thread holds it either way.
						session := fmt.Sprintf("  (provider session ses_… ended: %s %s: %s)", p.who, end.how, why)
						if got := failureLines(out); len(got) > 0 && strings.Contains(got[0], "(provider session ") {
							want = append([]string{session}, want...)
						}
						if got := sessionEnds(t, data, out); !slices.Equal(got, []string{fmt.Sprintf("%s %s: %s", p.who, end.how, why)}) {
							t.Errorf("the sessions' ends the thread holds: %q", got)
						}
					}
					if diff := cmp.Diff(want, failureLines(out)); diff != "" {
						t.Errorf("how the run and its session ended (-want +got):\n%s\nstdout:\n%s", diff, out)
					}
				})
			}
		}
	}
}

// A provider that floods is summed up: 10,000 lines that are not frames
// and 10,000 lines of stderr make five diagnostics and one that says how
// many more there were (on the terminal and in the log alike: the stream
// prints each event), and a failure that quotes the first line and how
// many more, and the last five stderr lines of 10,000. Through the real
// baton, embedded and as a service, with each plugin.
func TestProviderFloodIsSummedUp(t *testing.T) {
	const n = 10000
	for _, p := range brokenProviders {
		command := p.transcript(t, append(p.garbage(n),
			fmt.Sprintf(`{"type":"runtime_exit","status":"error","signal":"SIGKILL","stderr":"err <n>\n","repeat":%d}`, n))...)
		for _, m := range hostModes {
			t.Run(p.name+"/"+m.name, func(t *testing.T) {
				out, errOut, hostLog, code := runBroken(t, p, m.service, command, "--json")
				if code != exitFailed {
					t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitFailed, errOut)
				}
				var diags []string
				var failure string
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					pl, err := readPrinted([]byte(l))
					if err != nil {
						t.Fatalf("not one JSON object: %v\n%s", err, l)
					}
					var data struct {
						Title, Text string
						Failure     *struct{ Code, Message string }
					}
					json.Unmarshal(pl.Record.Data, &data)
					switch typ := pl.Record.Type; {
					case typ == "diagnostic.recorded":
						diags = append(diags, data.Title+" | "+data.Text)
					case typ == "run.ended" && data.Failure != nil:
						failure = data.Failure.Code + ": " + data.Failure.Message
					}
				}
				var want []string
				for i := 1; i <= 5; i++ {
					want = append(want, p.diagTitle+" | "+p.diag(i))
				}
				want = append(want, fmt.Sprintf("%s | %d more like this, not reported one by one (%d in all); the last 3: %s; %s; %s",
					p.diagTitle, n-5, n, p.diag(n-2), p.diag(n-1), p.diag(n)))
				if diff := cmp.Diff(want, diags); diff != "" {
					t.Errorf("diagnostics (-want +got):\n%s", diff)
				}
				wantFailure := fmt.Sprintf(`provider_exited: %s was killed by SIGKILL during the turn: it printed "garbage 1"%s, and %d more lines that were not frames; `+
					`its stderr ends: err 9996; err 9997; err 9998; err 9999; err 10000 (the last 5 of 10000 lines)`, p.who, p.not(), n-1)
				if diff := cmp.Diff(wantFailure, failure); diff != "" {
					t.Errorf("the run's failure (-want +got):\n%s", diff)
				}
				// The plugin's log, which the host shows at debug level,
				// has the first 20 stderr lines and says it logs no more.
				var logged, wantLogged []string
				for _, l := range strings.Split(hostLog, "\n") {
					if m := providerStderr.FindStringSubmatch(l); m != nil {
						logged = append(logged, m[1]+m[2])
					}
				}
				for i := 1; i <= 20; i++ {
					wantLogged = append(wantLogged, fmt.Sprintf(`line="err %d"`, i))
				}
				wantLogged = append(wantLogged, "more lines are not logged (the raw-frame log keeps them, an exit report quotes the last)")
				if diff := cmp.Diff(wantLogged, logged); diff != "" {
					t.Errorf("the provider's stderr in the host's log (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// A provider that answers its first request with what the plugin cannot
// use and dies is told by how it died, not by its answer: acp said "the
// agent speaks ACP version 0", codex "initialized: jsonrpc2: connection is
// closed". Through the real baton, embedded and as a service.
func TestProviderThatAnswersAndDiesSaysHow(t *testing.T) {
	const died = `{"type":"runtime_exit","status":"error","code":3,"stderr":"fatal: crashed after initialize\n"}`
	for _, tc := range []struct {
		provider string
		entries  []string
		want     string
	}{
		{"acp", []string{
			`{"type":"expect_outbound","label":"initialize","frame":{"id":0,"jsonrpc":"2.0","method":"initialize","params":"<any>"}}`,
			`{"type":"emit_inbound","label":"an empty answer","frame":{"id":0,"jsonrpc":"2.0","result":{}}}`, died},
			"acp: the agent exited with status 3 while the session opened: fatal: crashed after initialize"},
		{"codex", []string{
			`{"type":"expect_outbound","label":"initialize","frame":{"id":0,"jsonrpc":"2.0","method":"initialize","params":"<any>"}}`,
			`{"type":"emit_inbound","label":"an empty answer","frame":{"id":0,"result":{}}}`,
			`{"type":"expect_outbound","label":"initialized","frame":{"jsonrpc":"2.0","method":"initialized"}}`, died},
			"codex exited with status 3 before answering thread/start: fatal: crashed after initialize"},
	} {
		b, err := os.ReadFile(filepath.Join(root, "testdata", tc.provider, "exit_at_start.ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		header, _, _ := strings.Cut(string(b), "\n")
		file := filepath.Join(t.TempDir(), "answers_and_dies.ndjson")
		if err := os.WriteFile(file, []byte(header+"\n"+strings.Join(tc.entries, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		command := fmt.Sprintf("'%s' --transcript '%s' --speed 0", filepath.Join(binDir, "replaypeer"), file)
		for _, m := range hostModes {
			t.Run(tc.provider+"/"+m.name, func(t *testing.T) {
				out, errOut, _, code := runBroken(t, brokenProvider{name: tc.provider, message: "hi"}, m.service, command)
				if code != exitFailed {
					t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, out, errOut)
				}
				if diff := cmp.Diff([]string{"✖ run 1 failed: " + tc.want}, failureLines(out)); diff != "" {
					t.Errorf("how the run ended (-want +got):\n%s\nstdout:\n%s", diff, out)
				}
			})
		}
	}
}
