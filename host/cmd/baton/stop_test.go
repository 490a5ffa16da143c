package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

// Stop means stop, through the real binary: a provider that ignores the
// interrupt (testdata/acp/interrupt_ignored.ndjson: only SIGKILL ends it)
// is ended by the host after --grace, or at once with --force; the run
// ends interrupted saying so, and interrupt names the run.

// hostLogLine is a line of the host's log (hclog's level tag).
var hostLogLine = regexp.MustCompile(`\[(TRACE|DEBUG|INFO|WARN|ERROR)\]`)

// detachedIgnoredRun starts a run of acp/interrupt_ignored.ndjson on a
// service, leaves it running (--detach, Ctrl-C) once the agent is
// thinking, and returns its thread.
func detachedIgnoredRun(t *testing.T, data string) string {
	t.Helper()
	run := exec.Command(filepath.Join(binDir, "baton"), "run", "--json", "--data", data, "--provider", "acp", "--detach", "--cwd", t.TempDir(),
		"--provider-command", peerCommand(t, "acp/interrupt_ignored.ndjson"), "Remember the word: pineapple.")
	stdout, _ := run.StdoutPipe()
	var errb bytes.Buffer
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	out := newLineWaiter(stdout)
	thread := out.until(t, regexp.MustCompile(`"threadId":"(thr_[^"]+)"`))[1]
	out.until(t, regexp.MustCompile(`"kind":"reasoning"`)) // the agent took the prompt
	run.Process.Signal(syscall.SIGINT)
	all := out.rest()
	if err := run.Wait(); err != nil {
		t.Fatalf("run --detach after Ctrl-C: %v\n%s\n%s", err, all, errb.String())
	}
	return thread
}

// forcedRun checks that a thread's only run ended interrupted by force,
// with reason, and its session ended by the host.
func forcedRun(t *testing.T, th domain.Thread, reason string) {
	t.Helper()
	r := th.Runs[0]
	if diff := cmp.Diff(&domain.Failure{Code: domain.FailureForced, Message: reason}, r.Failure); r.Status != domain.RunStatusInterrupted || diff != "" {
		t.Errorf("run %s; failure (-want +got):\n%s", r.Status, diff)
	}
	if s := th.ProviderSessions[0]; s.Status != domain.SessionStatusEnded || s.EndReason != "ended by the host: "+reason {
		t.Errorf("session %s, ended for %q", s.Status, s.EndReason)
	}
}

// Against a service with --grace 1s: baton interrupt names the run it
// asked to stop; the provider ignores it, and a second after, the host
// ends its process and the run ends interrupted, saying it was forced.
// --force does it at once.
func TestInterruptAProviderThatIgnoresIt(t *testing.T) {
	data := t.TempDir()
	startServe(t, data, "--grace", "1s")
	thread := detachedIgnoredRun(t, data)

	watch := exec.Command(filepath.Join(binDir, "baton"), "watch", "--data", data, thread)
	wout, _ := watch.StdoutPipe()
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	w := newLineWaiter(wout)
	w.until(t, regexp.MustCompile(`^● thread `))
	start := time.Now()
	out, errOut, code := baton(t, "interrupt", "--data", data, thread)
	want := "run 1 of thread " + thread + ": interrupt sent; it ends when the provider confirms (follow it with baton watch " + thread + ")\n"
	if diff := cmp.Diff(want, out); code != exitOK || diff != "" {
		t.Fatalf("interrupt: exit %d (-want +got):\n%s%s", code, diff, errOut)
	}
	w.until(t, regexp.MustCompile(`^⏹ run 1 interrupted`))
	t.Logf("from baton interrupt to the run's end, with --grace 1s: %s", time.Since(start).Round(time.Millisecond))
	watch.Process.Signal(syscall.SIGINT)
	w.rest()
	watch.Wait()
	waitThread(t, data, thread, func(th domain.Thread) bool { return th.ProviderSessions[0].Status == domain.SessionStatusEnded })
	forcedRun(t, showJSON(t, data, thread), "the provider did not stop within 1s of the interrupt, so the host ended its process")

	forced := detachedIgnoredRun(t, data)
	out, errOut, code = baton(t, "interrupt", "--force", "--data", data, forced)
	want = "run 1 of thread " + forced + ": stopped by force; its provider's process is being ended\n"
	if diff := cmp.Diff(want, out); code != exitOK || diff != "" {
		t.Fatalf("interrupt --force: exit %d (-want +got):\n%s%s", code, diff, errOut)
	}
	waitThread(t, data, forced, func(th domain.Thread) bool {
		return th.Runs[0].Status.Terminal() && th.ProviderSessions[0].Status == domain.SessionStatusEnded
	})
	forcedRun(t, showJSON(t, data, forced), "stopped by force: the host ended the provider's process when asked to")

	// --run takes the ordinal baton show prints; one the thread lacks is
	// bad usage, and an ended run a conflict.
	if _, errOut, code := baton(t, "interrupt", "--run", "2", "--data", data, forced); code != exitUsage ||
		errOut != "baton: interrupt: thread "+forced+" has no run 2 (it has 1 run)\n" {
		t.Errorf("interrupt --run 2: exit %d, %q", code, errOut)
	}
	if _, errOut, code := baton(t, "interrupt", "--run", "1", "--data", data, forced); code != exitFailed || !strings.Contains(errOut, "run 1 has already ended (interrupted)") {
		t.Errorf("interrupt --run 1 of an ended run: exit %d, %q", code, errOut)
	}
}

// waitThread follows a thread (baton watch --json) until its projection,
// read after each event, satisfies ok.
func waitThread(t *testing.T, data, thread string, ok func(domain.Thread) bool) {
	t.Helper()
	if ok(showJSON(t, data, thread)) {
		return
	}
	watch := exec.Command(filepath.Join(binDir, "baton"), "watch", "--json", "--after", "0", "--data", data, thread)
	wout, _ := watch.StdoutPipe()
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		watch.Process.Signal(syscall.SIGINT)
		watch.Wait()
	}()
	w := newLineWaiter(wout)
	for {
		w.until(t, regexp.MustCompile(`.`))
		if ok(showJSON(t, data, thread)) {
			return
		}
	}
}

// baton run, embedded: the first Ctrl-C interrupts; the provider ignores
// it, and --grace later the host ends its process (exit 130, the run
// interrupted by force). A second Ctrl-C exits at once: the run ends
// interrupted, host shut down, and the printed summary is what the store
// holds. No host log line reaches the terminal.
func TestRunCtrlC(t *testing.T) {
	for _, twice := range []bool{false, true} {
		t.Run(map[bool]string{false: "once", true: "twice"}[twice], func(t *testing.T) {
			data := t.TempDir()
			cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--json", "--grace", "1s", "--data", data, "--cwd", t.TempDir(),
				"--provider", "acp", "--provider-command", peerCommand(t, "acp/interrupt_ignored.ndjson"), "Remember the word: pineapple.")
			stdout, _ := cmd.StdoutPipe()
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out := newLineWaiter(stdout)
			out.until(t, regexp.MustCompile(`"kind":"reasoning"`)) // the agent took the prompt
			cmd.Process.Signal(syscall.SIGINT)
			out.until(t, regexp.MustCompile(`"type":"run\.interrupt\.requested"`))
			var start time.Time
			if twice {
				start = time.Now()
				cmd.Process.Signal(syscall.SIGINT)
			}
			all := out.rest()
			err := cmd.Wait()
			if twice {
				t.Logf("from the second Ctrl-C to exit: %s", time.Since(start).Round(time.Millisecond))
			}
			if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != exitInterrupted {
				t.Fatalf("exit: %v, want %d\n%s\n%s", err, exitInterrupted, all, errb.String())
			}
			if l := hostLogLine.FindString(errb.String()); l != "" {
				t.Errorf("a host log line reached the terminal:\n%s", errb.String())
			}
			lines := strings.Split(strings.TrimSpace(all), "\n")
			l, err := readPrinted([]byte(lines[len(lines)-1]))
			printed := l.Thread
			if err != nil || l.Kind != "thread" {
				t.Fatalf("the last line is not the thread: %v\n%s", err, lines[len(lines)-1])
			}
			stored := showJSON(t, data, printed.ID)
			if diff := cmp.Diff(jsonOf(t, stored.Runs[0]), jsonOf(t, printed.Runs[0])); diff != "" {
				t.Errorf("the printed run is not the stored one (-stored +printed):\n%s", diff)
			}
			if !twice {
				forcedRun(t, stored, "the provider did not stop within 1s of the interrupt, so the host ended its process")
				return
			}
			want := &domain.Failure{Code: "host_shut_down", Message: "host shut down"}
			if r := printed.Runs[0]; r.Status != domain.RunStatusInterrupted || !cmp.Equal(want, r.Failure) {
				t.Errorf("after the second Ctrl-C the run is %s %+v; want interrupted, %+v", r.Status, r.Failure, want)
			}
		})
	}
}

// jsonOf is v's JSON form, indented: what a client reads of it.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
