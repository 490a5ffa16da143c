//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// watching is a `baton watch` process and the lines it prints.
type watching struct {
	cmd *exec.Cmd
	out *lineWaiter
}

func startWatch(t *testing.T, args ...string) *watching {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "baton"), append([]string{"watch"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // one stream: what it says of its end is part of it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &watching{cmd: cmd, out: newLineWaiter(stdout)}
}

// stop ends the watch with Ctrl-C and returns all it printed and how it
// exited.
func (w *watching) stop(t *testing.T) ([]string, error) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	return w.end()
}

// end waits for the watch to end by itself.
func (w *watching) end() ([]string, error) {
	w.out.rest()
	return w.out.seen, w.cmd.Wait()
}

// baton watch attached to a run that waits on a request, on a service:
// first where the thread stands (the run, its open item, the request and
// the command that answers it), then its events; the item that began
// before the watch came says its end. With --json the first line is the
// projection the service has.
func TestWatchAttachedMidRun(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data)
	c := s.client()
	id := createThread(t, c, "acp/approval_accept.ndjson", "ask")
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	_, reqID := askApproval(t, c, id, ev, "the request")
	before := thread(t, c, id) // the run waits on the request: nothing changes until it is answered
	ws, _ := before["cwd"].(string)
	seq, _ := before["sequence"].(float64)

	js := startWatch(t, "--json", "--data", data, id)
	first := js.out.until(t, regexp.MustCompile(`^\{.*$`))[0]
	l, err := readPrinted([]byte(first))
	if err != nil || l.Kind != "thread" {
		t.Fatalf("watch --json's first line: %v\n%s", err, first)
	}
	b, _ := json.Marshal(l.Thread)
	var got map[string]any
	json.Unmarshal(b, &got)
	if diff := cmp.Diff(before, got); diff != "" {
		t.Errorf("watch --json's first line (-the service's projection +printed):\n%s", diff)
	}
	js.stop(t)

	w := startWatch(t, "--data", data, id)
	w.out.until(t, regexp.MustCompile(`^    answer it: `))
	out, errOut, code := baton(t, "approve", "--data", data, reqID)
	if want := "request " + reqID + ": accept (thread " + id + ")\n"; code != exitOK || out != want {
		t.Fatalf("approve: exit %d\n%s%s\nwant %s", code, out, errOut, want)
	}
	w.out.until(t, regexp.MustCompile(`^✔ run 1 completed`))
	lines, err := w.stop(t)
	if err != nil {
		t.Errorf("watch after Ctrl-C: %v", err)
	}
	q := reqID
	want := []string{
		"● thread " + id + " · acp · " + ws + " (watching from sequence " + strconv.Itoa(int(seq)) + ")",
		"▶ run 1 waiting: Write allowed.txt",
		"  · file change Write " + ws + "/allowed.txt (in progress)",
		"  ? permission request " + q + ": Write " + ws + "/allowed.txt",
		"    answer it: baton approve " + q + ", or baton decline " + q,
		"  ? request " + q + ": accept (by client)",
		"  ? request " + q + " resolved: accept",
		"  · file change Write " + ws + "/allowed.txt completed",
		"  I wrote allowed.txt.",
		"  ⛁ checkpoint of run 1: missing (" + ws + " is not in a git repository)",
		"✔ run 1 completed (end_turn)",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("watch attached mid-run (-want +got):\n%s", diff)
	}
}

// baton watch on an embedded host, of a thread a killed host left with a
// run in flight and two queued: where it stands (no run active, the last
// one's end, the queued runs), then it follows until Ctrl-C.
func TestWatchWhereAKilledHostLeftItStands(t *testing.T) {
	data, id := killedWithQueuedRuns(t)
	if err := os.Chmod(data, 0o700); err != nil { // the warning of a data dir others may reach is not this test's
		t.Fatal(err)
	}
	th := showJSON(t, data, id) // the run in flight was ended by this read's host
	w := startWatch(t, "--data", data, id)
	w.out.until(t, regexp.MustCompile(`^▶ run 3 queued`))
	lines, err := w.stop(t)
	if err != nil {
		t.Errorf("watch after Ctrl-C: %v", err)
	}
	want := []string{
		"● thread " + id + " · acp · " + th.Cwd + " (watching from sequence " + strconv.Itoa(int(th.Sequence)) + ")",
		"■ no run is active; the last, run 1, failed",
		"▶ run 2 queued: fix the tests",
		"▶ run 3 queued: add docs",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("watch of what a killed host left (-want +got):\n%s", diff)
	}
}

// A service killed mid-watch, and mid-run: baton watch and baton run say
// the service stopped, with how to follow the thread once it is back, and
// exit 1; never the transport's EOF.
func TestServiceStoppedMidStream(t *testing.T) {
	data := t.TempDir()
	s := startService(t, data)
	run := exec.Command(filepath.Join(binDir, "baton"), "run", "--data", data, "--provider", "acp", "--cwd", t.TempDir(),
		"--provider-command", peerCommand(t, "acp/stall.ndjson"), "Take your time")
	stdout, _ := run.StdoutPipe()
	run.Stderr = run.Stdout
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Process.Kill(); run.Wait() })
	ro := newLineWaiter(stdout)
	id := ro.until(t, regexp.MustCompile(`^● thread (\S+) `))[1]
	c := s.client()
	ev, _ := subscribe(t.Context(), t, c, id, 0)
	until(t, ev, "the provider's thinking", ofType("node.delta")) // then it stalls: nothing more comes
	th := thread(t, c, id)
	seq, _ := th["sequence"].(float64)
	w := startWatch(t, "--data", data, id)
	w.out.until(t, regexp.MustCompile(`^  · reasoning`))

	s.signal(syscall.SIGKILL)
	stopped := "baton: the service stopped; once it runs again, follow the thread with: baton watch " + id
	lines, err := w.end()
	want := []string{
		"● thread " + id + " · acp · " + th["cwd"].(string) + " (watching from sequence " + strconv.Itoa(int(seq)) + ")",
		"▶ run 1 running: Take your time",
		"  · reasoning: Thinking (in progress)",
		stopped,
	}
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != exitFailed {
		t.Errorf("watch when the service was killed: %v, want exit status 1", err)
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("watch when the service was killed (-want +got):\n%s", diff)
	}
	ro.rest()
	err = run.Wait()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != exitFailed || ro.seen[len(ro.seen)-1] != stopped {
		t.Errorf("run when the service was killed: %v; want exit 1 and its last line\n%s\n%s", err, stopped, strings.Join(ro.seen, "\n"))
	}
	for _, l := range append(lines, ro.seen...) {
		if strings.Contains(l, "EOF") || strings.Contains(l, "rpc error") || strings.Contains(l, "Unavailable") {
			t.Errorf("a line in the transport's words: %q", l)
		}
	}
}
