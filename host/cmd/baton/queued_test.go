//go:build linux

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// killedWithQueuedRuns runs baton run with three messages on
// testdata/acp/restart_queued_many.ndjson and kills it with SIGKILL once
// the first run's provider is thinking, the other two queued behind it. It
// returns the data dir and the thread, once the killed host's plugin and
// provider processes are gone (read with baton show, which sends nothing).
func killedWithQueuedRuns(t *testing.T) (data, threadID string) {
	data, ws := t.TempDir(), t.TempDir()
	provider := peerCommand(t, "acp/restart_queued_many.ndjson") + " --state '" + filepath.Join(t.TempDir(), "cursor") + "'"
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--json", "--data", data, "--cwd", ws, "--provider", "acp",
		"--provider-command", provider, "Take your time", "fix the tests", "add docs")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		queued, thinking := 0, false
		for sc.Scan() {
			l, _ := readPrinted(sc.Bytes())
			rec := l.Record
			switch {
			case rec.Type == "run.queued":
				queued++
			case rec.Type == "node.started" && strings.Contains(string(rec.Data), `"kind":"reasoning"`):
				thinking = true
			}
			if queued == 3 && thinking {
				ready <- rec.ThreadID
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case threadID = <-ready:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the provider never started thinking with two runs queued")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	th := showJSON(t, data, threadID)
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range th.ProviderSessions {
		for _, pid := range []int{s.PluginPid, s.ProviderPid} {
			if !waitGone(pid, deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("process %d outlived the killed host", pid)
			}
		}
	}
	return data, threadID
}

// queuedRun is what a test checks of a run.
type queuedRun struct {
	Ordinal    int
	Status     domain.RunStatus
	StopReason string
	Failure    string
	Attempts   int
}

func queuedRuns(th domain.Thread) []queuedRun {
	var out []queuedRun
	for _, r := range th.Runs {
		q := queuedRun{Ordinal: r.Ordinal, Status: r.Status, StopReason: r.StopReason, Attempts: len(r.Attempts)}
		if r.Failure != nil {
			q.Failure = r.Failure.Code
		}
		out = append(out, q)
	}
	return out
}

// sentToProvider is every frame the host sent to a provider, from the
// data dir's raw-frame logs.
func sentToProvider(t *testing.T, data string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(data, "rawframes", "*.ndjson*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no raw-frame logs in %s: %v", data, err)
	}
	var sent strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"dir":"out"`) {
				sent.WriteString(l + "\n")
			}
		}
	}
	return sent.String()
}

// Runs a killed host left queued are sent when the thread is continued,
// before its new message, and the stream says so first, naming them: in
// words, and with --json as the event itself.
func TestQueuedRunsAfterSIGKILLAreNamed(t *testing.T) {
	for _, jsonOut := range []bool{false, true} {
		t.Run(map[bool]string{false: "readable", true: "json"}[jsonOut], func(t *testing.T) {
			data, threadID := killedWithQueuedRuns(t)
			// Reading the thread sent nothing: the runs are still queued.
			th := showJSON(t, data, threadID)
			if diff := cmp.Diff([]queuedRun{{1, domain.RunStatusFailed, "", "host_restarted", 1}, {2, domain.RunStatusQueued, "", "", 0},
				{3, domain.RunStatusQueued, "", "", 0}}, queuedRuns(th)); diff != "" {
				t.Fatalf("runs after the kill, read (-want +got):\n%s", diff)
			}
			args := []string{"run", "--data", data, "--thread", threadID, "and then this"}
			if jsonOut {
				args = append(args, "--json")
			}
			out, stderr, code := baton(t, args...)
			if code != 0 {
				t.Fatalf("continue: exit %d\n%s\n%s", code, out, stderr)
			}
			var got, want []string
			if jsonOut {
				var resumed domain.Payload
				for _, l := range strings.Split(out, "\n") {
					pl, err := readPrinted([]byte(l))
					if err != nil {
						continue
					}
					rec := pl.Record
					switch rec.Type {
					case "run.queue.resumed":
						resumed, _ = domain.DecodePayload(rec.Type, rec.Data)
						fallthrough
					case "run.queued", "run.started":
						got = append(got, rec.Type)
					}
				}
				want = []string{"run.queued", "run.queue.resumed", "run.started", "run.started", "run.started"}
				wantEvent := domain.QueuedRunsResumed{Reason: domain.ResumeReason, Runs: []domain.QueuedRun{
					{RunID: th.Runs[1].ID, Ordinal: 2, Input: "fix the tests"}, {RunID: th.Runs[2].ID, Ordinal: 3, Input: "add docs"}}}
				if diff := cmp.Diff(wantEvent, resumed); diff != "" {
					t.Errorf("the run.queue.resumed event (-want +got):\n%s", diff)
				}
			} else {
				for _, l := range strings.Split(out, "\n") {
					if strings.HasPrefix(l, "!") || strings.HasPrefix(l, "▶") || strings.HasPrefix(l, "✔") || strings.HasPrefix(l, "✖") {
						got = append(got, l)
					}
				}
				want = []string{"▶ run 4 queued: and then this",
					`! 2 runs queued when the host stopped are sent first: run 2 "fix the tests", run 3 "add docs"; run 2 starts now (stop it: baton interrupt ` +
						threadID + `); drop the rest: baton cancel ` + threadID + ` --queued`,
					"▶ run 2 started", "✔ run 2 completed (end_turn)", "▶ run 3 started", "✔ run 3 completed (end_turn)",
					"▶ run 4 started", "✔ run 4 completed (end_turn)"}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the stream (-want +got):\n%s\nstdout:\n%s", diff, out)
			}
			if diff := cmp.Diff([]queuedRun{{1, domain.RunStatusFailed, "", "host_restarted", 1}, {2, domain.RunStatusCompleted, "end_turn", "", 1},
				{3, domain.RunStatusCompleted, "end_turn", "", 1}, {4, domain.RunStatusCompleted, "end_turn", "", 1}},
				queuedRuns(showJSON(t, data, threadID))); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if sent := sentToProvider(t, data); !strings.Contains(sent, "fix the tests") || !strings.Contains(sent, "add docs") {
				t.Errorf("the queued runs' prompts did not reach the provider:\n%s", sent)
			}
		})
	}
}

// baton cancel THREAD --queued drops the runs a killed host left queued:
// they end cancelled with its reason, nothing of them reaches the
// provider, and it says what it dropped (nothing, the second time).
func TestCancelQueuedAfterSIGKILL(t *testing.T) {
	data, threadID := killedWithQueuedRuns(t)
	out, stderr, code := baton(t, "cancel", "--data", data, threadID, "--queued")
	if want := `dropped 2 queued runs of thread ` + threadID + `: run 2 "fix the tests", run 3 "add docs"` + "\n"; code != 0 || out != want {
		t.Fatalf("cancel: exit %d\n got %q\nwant %q\n%s", code, out, want, stderr)
	}
	th := showJSON(t, data, threadID)
	if diff := cmp.Diff([]queuedRun{{1, domain.RunStatusFailed, "", "host_restarted", 1}, {2, domain.RunStatusCancelled, cancelReason, "", 0},
		{3, domain.RunStatusCancelled, cancelReason, "", 0}}, queuedRuns(th)); diff != "" {
		t.Errorf("runs after the cancel (-want +got):\n%s", diff)
	}
	if len(th.ProviderSessions) != 1 {
		t.Errorf("sessions %+v; want only the killed host's", th.ProviderSessions)
	}
	if sent := sentToProvider(t, data); strings.Contains(sent, "fix the tests") || strings.Contains(sent, "add docs") {
		t.Errorf("a cancelled run's prompt reached the provider:\n%s", sent)
	}
	out, stderr, code = baton(t, "cancel", "--data", data, threadID, "--queued")
	if want := "thread " + threadID + " has no queued runs; nothing dropped\n"; code != 0 || out != want {
		t.Errorf("cancel again: exit %d\n got %q\nwant %q\n%s", code, out, want, stderr)
	}
}

// cancel's usage: what to drop must be said, once; a run must be one of
// the thread's, still queued.
func TestCancelUsage(t *testing.T) {
	data, ws := privateDir(t), t.TempDir()
	out, stderr, code := baton(t, "run", "--data", data, "--cwd", ws, "--provider", "acp", "--provider-command", peerCommand(t, "acp/simple.ndjson"),
		lines(t, "acp/simple.messages")[0])
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
	}
	var threadID string
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "--thread "); i >= 0 {
			threadID = strings.TrimSuffix(l[i+len("--thread "):], ")")
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{threadID}, exitUsage, "baton: cancel: say what to drop: --queued (every queued run) or --run N (one queued run); to stop the active run, use baton interrupt " + threadID + "\n"},
		{[]string{threadID, "--queued", "--run", "1"}, exitUsage, "baton: cancel: give --queued or --run N, not both\n"},
		{[]string{threadID, "--run", "-1"}, exitUsage, "baton: cancel: --run must be a run ordinal from 1, got -1\n"},
		{[]string{threadID, "--run", "0"}, exitUsage, "baton: cancel: --run must be a run ordinal from 1, got 0\n"},
		{[]string{threadID, "--run", "7"}, exitUsage, "baton: cancel: thread " + threadID + " has no run 7 (it has 1 run)\n"},
		{[]string{threadID, "--run", "1"}, exitFailed, "baton: cancel: run 1 of thread " + threadID + " is completed, not queued; only a run that has not started can be dropped (stop a running one with baton interrupt " + threadID + " --run 1)\n"},
		{[]string{"thr_nope", "--queued"}, exitUsage, "baton: not found: thread \"thr_nope\"\n"},
	} {
		_, stderr, code := baton(t, append([]string{"cancel", "--data", data}, tc.args...)...)
		if code != tc.code || stderr != tc.msg {
			t.Errorf("cancel %v: exit %d %q, want %d %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}
