package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/domain/domaintest"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/service"
)

// A thread of 20 runs, longer than the projection a host holds (its
// newest 8): baton run's last line is every run it ran; baton show --json
// is the whole thread its log rebuilds (each entry once), and baton show
// lists every run and message; diff, interrupt and cancel name a run that
// left the projection by its ordinal and say what it is.
func TestShowReadsALongThreadInPages(t *testing.T) {
	ws, data := t.TempDir(), t.TempDir()
	gitInit(t, ws)
	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	msgs := lines(t, "acp/long_thread.messages")
	out, errOut, code := baton(t, append([]string{"run", "--json", "--data", data, "--cwd", ws, "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/long_thread.ndjson")}, msgs...)...)
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	var final domain.Thread
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		l, _ := readPrinted(sc.Bytes())
		final = l.Thread
	}
	var ords []int
	for _, r := range final.Runs {
		if r.Status == domain.RunStatusCompleted {
			ords = append(ords, r.Ordinal)
		}
	}
	if want := seq(1, 20); !slices.Equal(ords, want) {
		t.Fatalf("run's last line has completed runs %v, want %v", ords, want)
	}
	thread := final.ID

	shown := showJSON(t, data, thread)
	if d := gocmp.Diff(domaintest.Normal(rebuilt(t, data, thread)), domaintest.Normal(&shown)); d != "" {
		t.Fatalf("show --json (-the log +shown):\n%s", d)
	}
	var byRun []int // the run of each message, in the order shown
	for _, m := range shown.Messages {
		byRun = append(byRun, runByID(shown, m.RunID).Ordinal)
	}
	if !slices.IsSorted(byRun) || len(byRun) != 40 {
		t.Fatalf("messages by run: %v", byRun)
	}

	text, errOut, code := baton(t, "show", "--data", data, thread)
	if code != exitOK || !strings.Contains(text, "\nruns (20):\n") || !strings.Contains(text, "\nmessages (40):\n") ||
		!strings.Contains(text, "run 1 user: Step 1: add step 1 to the log.") || !strings.Contains(text, "run 20 assistant: Logged step 20.") {
		t.Fatalf("show: exit %d\n%s\n%s", code, text, errOut)
	}
	var want []string
	for i := 1; i <= 20; i++ {
		want = append(want, fmt.Sprintf("%d %s completed (end_turn) Step %d: add step %d to the log.", i, runNumbered(shown, i).ID, i, i))
	}
	if d := gocmp.Diff(want, section(t, text, "runs")); d != "" {
		t.Errorf("show's runs (-want +got):\n%s", d)
	}

	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"diff", thread, "--run", "3"}, exitOK, "+++ b/log/step-3.txt"},
		{[]string{"interrupt", thread, "--run", "2"}, exitFailed, "baton: interrupt: run 2 has already ended (completed)\n"},
		{[]string{"cancel", thread, "--run", "2"}, exitFailed, fmt.Sprintf("baton: cancel: run 2 of thread %s is completed, not queued; only a run that has not started can be dropped (stop a running one with baton interrupt %s --run 2)\n", thread, thread)},
		{[]string{"cancel", thread, "--run", "21"}, exitUsage, fmt.Sprintf("baton: cancel: thread %s has no run 21 (it has 20 runs)\n", thread)},
	} {
		stdout, stderr, code := baton(t, append(c.args, "--data", data)...)
		if got := stdout + stderr; code != c.code || (c.code == exitOK && !strings.Contains(got, c.out)) || (c.code != exitOK && stderr != c.out) {
			t.Errorf("baton %v: exit %d (want %d)\n%s\nwant: %s", c.args, code, c.code, got, c.out)
		}
	}

	// Pages smaller than the thread: its runs and their messages read
	// from many pages (7 runs and 3 messages at a time) and put end to
	// end, from run 1 and from run 5.
	defer func(runs, msgs uint32) { pageRuns, pageMessages = runs, msgs }(pageRuns, pageMessages)
	pageRuns, pageMessages = 7, 3
	g := &globals{data: data, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	c, err := g.connectFor(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	read, err := c.threadFrom(t.Context(), thread, 1)
	if err != nil {
		t.Fatal(err)
	}
	whole := service.ThreadOf(read)
	if d := gocmp.Diff(domaintest.Normal(rebuilt(t, data, thread)), domaintest.Normal(&whole)); d != "" {
		t.Fatalf("threadFrom 1 in pages of 7 runs and 3 messages (-the log +read):\n%s", d)
	}
	read, err = c.threadFrom(t.Context(), thread, 5)
	if err != nil {
		t.Fatal(err)
	}
	later := service.ThreadOf(read)
	var got []string
	for _, m := range later.Messages {
		got = append(got, fmt.Sprintf("%d %s", runByID(later, m.RunID).Ordinal, m.Role))
	}
	want = nil
	for i := 5; i <= 20; i++ {
		want = append(want, fmt.Sprintf("%d user", i), fmt.Sprintf("%d assistant", i))
	}
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("threadFrom 5: messages by run (-want +got):\n%s", d)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func runByID(t domain.Thread, id string) domain.Run {
	for _, r := range t.Runs {
		if r.ID == id {
			return r
		}
	}
	return domain.Run{}
}

func runNumbered(t domain.Thread, ordinal int) domain.Run {
	for _, r := range t.Runs {
		if r.Ordinal == ordinal {
			return r
		}
	}
	return domain.Run{}
}

// rebuilt is the thread a data dir's log rebuilds, keeping every run.
func rebuilt(t *testing.T, data, threadID string) *domain.Thread {
	t.Helper()
	s, err := eventlog.OpenWith(filepath.Join(data, "events"), eventlog.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	th, err := rebuild(s, threadID, true)
	if err != nil {
		t.Fatal(err)
	}
	return &th
}
