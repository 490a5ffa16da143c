//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// The SIGKILL sweep: the real baton binary, with the ACP plugin and the
// replay peer, killed with SIGKILL at random points of replayed multi-turn
// sessions, all on one data dir. After each kill (and after the sweep) a
// host opened on the data dir must find:
//
//   - every event a killed or finished baton printed (baton run --json
//     prints each event once it is committed) in the log, at its sequence,
//     unchanged, and the log's sequences dense from 1, each thread's index
//     holding exactly its events of the global log;
//   - no run left queued, starting, running or waiting: recovery ended each
//     one the killed host had in flight, completed if its turn had ended
//     (run.completing committed), else failed with host_restarted and the
//     recovery's reason; and no provider session left open;
//   - no provider side effect repeated: in the raw frames of each provider
//     session (DATA/rawframes/SESSION.ndjson), the session/prompt frames
//     are the prompts of that session's attempts, in order, each at most
//     once, and at least those whose provider turn was bound; a session the
//     log does not know was sent no prompt;
//   - no plugin or provider process outliving the killed host (the test
//     process is their subreaper and waits for them).
//
// The provider model. Each thread replays testdata/acp/resume.ndjson (its
// prompts' text made "<any>": each run's input names its step, and a
// continuation may carry a handoff, below) with its own cursor file
// (replaypeer --state): the transcript's first part is a fresh
// conversation (initialize, session/new, a prompt), its second a resumed
// one (initialize, session/load of the first part's session, a prompt),
// played at --speed 0. Every
// baton invocation starts one provider process for one run, and a killed
// run is never sent again (recovery fails it; its prompt may or may not
// have reached the peer), so what the next process is asked is a function
// of the committed log alone: a thread whose provider thread is bound
// (provider.thread.bound) resumes it, one whose is not starts afresh. Before
// each continuation the test sets the thread's cursor to the matching part
// and sends that part's message; the peer then checks every frame the
// plugin sends, so a continuation that re-sent a killed turn, or resumed
// what was never bound, fails as a mismatch (a failed run, not
// host_restarted). A run killed after its prompt was dispatched but
// before the provider's turn was bound is one the provider's conversation
// is taken not to have seen: the thread's next run carries a
// delta_since_target_last_seen handoff of it, before its input.
//
// Kill points: after a random count of printed lines (each one a committed
// event for --json; baton send prints the readable stream), or after a
// random delay from the start (the store's open and the recovery of the
// last kill, before anything is printed). A check after a kill is skipped
// at random; the next invocation then starts a new thread and its host
// recovers the killed one (and may be killed while it does), and the next
// check verifies both.
//
// BATON_SIGKILL_SEED replays one sweep's choices (the seed is logged; the
// kill points that follow a count of lines land as the processes' timing
// lets them); BATON_SIGKILL_KILLS sets how many kills, 100 by default
// (about 70s on two busy cores, 140s under the race detector).
func TestSIGKILLSweep(t *testing.T) {
	kills := 100
	if v := os.Getenv("BATON_SIGKILL_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BATON_SIGKILL_KILLS=%q: want a count, 1 or more", v)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("BATON_SIGKILL_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("BATON_SIGKILL_SEED=%q: want an unsigned integer", v)
		}
		seed = n
	}
	t.Logf("seed %d (replay with BATON_SIGKILL_SEED=%d), %d kills", seed, seed, kills)

	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("become the subreaper of the killed hosts' processes: %v", err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	dir := t.TempDir()
	transcript := promptsAnyText(t, filepath.Join(root, "testdata", "acp", "resume.ndjson"), dir)
	s := &sweep{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), data: t.TempDir(), dir: dir,
		transcript: transcript, resumeAt: resumeCursor(t, transcript), threads: map[string]*sweepThread{},
		points: map[string]int{}, recovered: true}
	start := time.Now()
	n, runs := 0, 0
	for step := 0; n < kills; step++ {
		if step > 4*kills {
			t.Fatalf("%d steps made only %d kills", step, n)
		}
		inv := s.step(step)
		runs++
		if inv.killed {
			n++
			s.points[inv.point]++
		}
		// Reopen and check after most kills; else the next invocation's
		// host recovers the killed one, and the next check sees both.
		if !inv.killed || s.rng.IntN(4) > 0 {
			s.check(fmt.Sprintf("step %d (%s)", step, inv))
		} else {
			s.recovered = false
		}
		if t.Failed() {
			t.Fatalf("stopped at step %d; replay with BATON_SIGKILL_SEED=%d", step, seed)
		}
	}
	s.check("the end")
	keys := make([]string, 0, len(s.points))
	for k := range s.points {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %3d  %s", s.points[k], k)
	}
	keys = keys[:0]
	for k := range s.seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteString("\nfound:")
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %3d  %s", s.seen[k], k)
	}
	t.Logf("%d kills in %d invocations on %d threads, %d printed events checked, %v; killed after:%s",
		n, runs, len(s.threads), len(s.printed), time.Since(start).Round(time.Millisecond), b.String())
}

type sweep struct {
	t          *testing.T
	rng        *rand.Rand
	data, dir  string
	transcript string
	resumeAt   int // the cursor of the transcript's resumed part
	// threads are the threads the last check found, by id.
	threads map[string]*sweepThread
	// recovered says a check has reopened the data dir since the last
	// kill: every thread's state is known.
	recovered bool
	// printed is every event a baton printed, in the order printed.
	printed []eventlog.Record
	points  map[string]int
	created int
	// seen counts what the last check found: runs by how they ended,
	// prompts sent with a handoff before them.
	seen map[string]int
}

type sweepThread struct {
	id, state string
	bound     bool // its provider thread is bound: a continuation resumes it
}

type invocation struct {
	args   []string
	killed bool
	point  string // what was printed last before the kill
	stdout []string
	stderr string
	code   int
}

func (inv invocation) String() string {
	what := "finished"
	if inv.killed {
		what = "killed after " + inv.point
	}
	return fmt.Sprintf("baton %s: %s", strings.Join(inv.args, " "), what)
}

// Lines printed by each kind of invocation, about: the kill point is drawn
// up to a few past them, so that some invocations finish.
const (
	freshLines  = 24
	resumeLines = 22
	sendLines   = 6
)

// step runs one baton invocation and kills it at a random point.
func (s *sweep) step(step int) invocation {
	s.t.Helper()
	var ids []string
	for id := range s.threads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var args []string
	var max int
	jsonOut := true
	if !s.recovered || len(ids) == 0 || s.rng.IntN(3) == 0 {
		// A new thread, with its own cursor file.
		s.created++
		ws := filepath.Join(s.dir, fmt.Sprintf("ws%d", s.created))
		gitInit(s.t, ws)
		state := filepath.Join(s.dir, fmt.Sprintf("cursor%d", s.created))
		cmd := fmt.Sprintf("'%s' --transcript '%s' --speed 0 --state '%s'", filepath.Join(binDir, "replaypeer"), s.transcript, state)
		args = []string{"run", "--json", "--data", s.data, "--cwd", ws, "--provider", "acp", "--provider-command", cmd,
			fmt.Sprintf("step %d: remember the word: pineapple.", step)}
		max = freshLines
	} else {
		th := s.threads[ids[s.rng.IntN(len(ids))]]
		cursor, msg := 0, fmt.Sprintf("step %d: remember the word: pineapple.", step)
		max = freshLines
		if th.bound {
			cursor, msg, max = s.resumeAt, fmt.Sprintf("step %d: what was the word?", step), resumeLines
		}
		if err := os.WriteFile(th.state, fmt.Appendf(nil, `{"cursor":%d}`, cursor), 0o600); err != nil {
			s.t.Fatal(err)
		}
		if s.rng.IntN(3) == 0 {
			args, jsonOut, max = []string{"send", "--data", s.data, th.id, msg}, false, sendLines
		} else {
			args = []string{"run", "--json", "--data", s.data, "--thread", th.id, msg}
		}
	}
	var afterLines int
	var delay time.Duration
	if s.rng.IntN(4) == 0 {
		delay = time.Duration(1+s.rng.IntN(400)) * time.Millisecond
	} else {
		afterLines = 1 + s.rng.IntN(max+3)
	}
	inv := s.invoke(args, afterLines, delay)
	if !inv.killed && inv.code != 0 {
		s.t.Errorf("step %d: %s: exit %d\nstdout:\n%s\nstderr:\n%s", step, inv, inv.code, strings.Join(inv.stdout, "\n"), inv.stderr)
	}
	// Every event printed was committed: remember it, to find at every
	// check from now on.
	var last uint64
	for i, l := range inv.stdout {
		if !jsonOut || !strings.HasPrefix(l, `{"kind":"event"`) {
			continue
		}
		var rec eventlog.Record
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			s.t.Errorf("step %d: %s: line %d is not an event: %v\n%s", step, inv, i+1, err, l)
			continue
		}
		if rec.Sequence <= last {
			s.t.Errorf("step %d: %s: printed sequence %d after %d", step, inv, rec.Sequence, last)
		}
		last = rec.Sequence
		s.printed = append(s.printed, rec)
	}
	s.reapOrphans(step)
	return inv
}

// invoke runs baton and sends it SIGKILL once it has printed afterLines
// lines, or after delay: all it printed up to its death is read.
func (s *sweep) invoke(args []string, afterLines int, delay time.Duration) invocation {
	s.t.Helper()
	inv := invocation{args: args, point: "start"}
	if delay > 0 {
		inv.point = fmt.Sprintf("a delay (%v)", delay.Round(10*time.Millisecond))
	}
	cmd := exec.Command(filepath.Join(binDir, "baton"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		r := bufio.NewReader(stdout)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return // a line cut by the kill was not printed whole: not counted
			}
			lines <- strings.TrimSuffix(l, "\n")
		}
	}()
	var timer <-chan time.Time
	if delay > 0 {
		timer = time.After(delay)
	}
	kill := func() {
		if !inv.killed {
			cmd.Process.Signal(syscall.SIGKILL)
			inv.killed = true
		}
	}
	for open := true; open; {
		select {
		case l, ok := <-lines:
			if !ok {
				open = false
				break
			}
			inv.stdout = append(inv.stdout, l)
			if !inv.killed {
				inv.point = linePoint(l)
			}
			if len(inv.stdout) == afterLines {
				kill()
			}
		case <-timer:
			kill()
		}
	}
	err = cmd.Wait()

	inv.stderr = stderr.String()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		inv.killed = true
	} else {
		inv.killed = false // it ended before the signal
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			inv.code = ee.ExitCode()
		}
	}
	return inv
}

// linePoint names the kill point after a printed line: the event's type
// (with a node's kind), or the readable line's first word.
func linePoint(l string) string {
	var e struct {
		Kind string `json:"kind"`
		Type string `json:"type"`
		Data struct {
			Kind   string `json:"kind"`
			Status string `json:"status"`
		} `json:"data"`
	}
	if json.Unmarshal([]byte(l), &e) != nil {
		f := strings.Fields(l)
		if len(f) == 0 {
			return "send: an empty line"
		}
		return "send: a line " + strconv.Quote(f[0])
	}
	switch {
	case e.Kind == "thread":
		return "the final projection"
	case e.Type == "node.started":
		return e.Type + " " + e.Data.Kind
	case e.Type == "node.completed" || e.Type == "run.ended":
		return e.Type + " " + e.Data.Status
	}
	return e.Type
}

// reapOrphans waits for the processes the killed host left (the plugin and
// the provider, reparented to this process) to end on their own, and reaps
// them: none may live on, and none may write a cursor file after the test
// sets it for the next invocation.
func (s *sweep) reapOrphans(step int) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		kids := children()
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			if !waitGone(pid, deadline) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				s.t.Errorf("step %d: process %d (%s) outlived the killed host by 30s", step, pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
				syscall.Kill(pid, syscall.SIGKILL)
			}
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
	}
}

// children are this process's child processes, from /proc.
func children() []int {
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			out = append(out, pid)
		}
	}
	return out
}

// check opens a host on the data dir, as the next baton would (recovering
// what the last one left), and asserts what the sweep promises.
func (s *sweep) check(when string) {
	t := s.t
	t.Helper()
	h, err := orchestrator.Open(orchestrator.Config{DataDir: s.data, PluginDirs: []string{binDir}})
	if err != nil {
		t.Fatalf("%s: a new host on the data dir: %v", when, err)
	}
	defer h.Close()
	s.recovered = true

	// The log: dense from 1, and every printed event in it, unchanged.
	last := h.LastSequence()
	var all []eventlog.Record
	if last > 0 {
		for rec, err := range h.Events(t.Context(), 0) {
			if err != nil {
				t.Fatalf("%s: read the log: %v", when, err)
			}
			if want := uint64(len(all) + 1); rec.Sequence != want {
				t.Fatalf("%s: the log's sequence %d follows %d", when, rec.Sequence, want-1)
			}
			all = append(all, rec)
			if rec.Sequence == last {
				break
			}
		}
	}
	for _, p := range s.printed {
		if p.Sequence > last {
			t.Errorf("%s: printed event %d (%s) is past the log's last sequence %d", when, p.Sequence, p.Type, last)
			continue
		}
		if d := cmp.Diff(p, all[p.Sequence-1], compactJSON); d != "" {
			t.Errorf("%s: printed event %d differs in the log (-printed +stored):\n%s", when, p.Sequence, d)
		}
	}

	// Each thread: its index is its part of the log; nothing in flight.
	sums, err := h.Threads("", 0)
	if err != nil {
		t.Fatalf("%s: list threads: %v", when, err)
	}
	threads := map[string]*sweepThread{}
	var projections []domain.Thread
	for _, sum := range sums {
		th, err := h.Thread(sum.ID)
		if err != nil {
			t.Fatalf("%s: thread %s: %v", when, sum.ID, err)
		}
		var own []eventlog.Record
		for _, r := range all {
			if r.ThreadID == th.ID {
				own = append(own, r)
			}
		}
		idx, err := h.ThreadEvents(th.ID, 0)
		if err != nil {
			t.Fatalf("%s: thread %s's events: %v", when, th.ID, err)
		}
		idx = slices.DeleteFunc(idx, func(r eventlog.Record) bool { return r.Sequence > last })
		if d := cmp.Diff(own, idx, compactJSON); d != "" {
			t.Errorf("%s: thread %s's index differs from the log (-log +index):\n%s", when, th.ID, d)
		}
		s.checkThread(when, th, own)
		st := stateFile(th.ProviderCommand.Argv)
		if st == "" {
			t.Fatalf("%s: thread %s's provider command has no --state: %q", when, th.ID, th.ProviderCommand.Argv)
		}
		threads[th.ID] = &sweepThread{id: th.ID, state: st, bound: len(th.ProviderThreads) > 0}
		projections = append(projections, th)
	}
	s.threads = threads
	s.checkFrames(when, projections)
}

// compactJSON compares JSON values by what they decode to (the printer
// writes an event's fields in key order, the log in the event's).
var compactJSON = cmp.Transformer("decode", func(m json.RawMessage) any {
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		return "invalid JSON: " + string(m)
	}
	return v
})

const recoverReason = "the host restarted while this was in progress"

// checkThread asserts that nothing of a thread is left in flight after a
// host's recovery: each run completed (its turn had ended completed:
// run.completing said so) or failed with host_restarted and the recovery's
// reason, each session ended.
func (s *sweep) checkThread(when string, th domain.Thread, evs []eventlog.Record) {
	t := s.t
	completing := map[string]bool{}
	for _, r := range evs {
		if r.Type == "run.completing" {
			var d struct {
				RunID  string `json:"runId"`
				Status string `json:"status"`
			}
			json.Unmarshal(r.Data, &d)
			completing[d.RunID] = completing[d.RunID] || d.Status == "completed"
		}
	}
	for _, r := range th.Runs {
		type end struct {
			Status  domain.RunStatus
			Code    string
			Message string
		}
		got := end{Status: r.Status}
		if r.Failure != nil {
			got.Code, got.Message = r.Failure.Code, r.Failure.Message
		}
		want := end{Status: domain.RunStatusCompleted}
		if !completing[r.ID] {
			want = end{Status: domain.RunStatusFailed, Code: "host_restarted", Message: recoverReason}
		}
		if got != want {
			t.Errorf("%s: thread %s run %d (%s) ended %+v; want %+v", when, th.ID, r.Ordinal, r.ID, got, want)
		}
	}
	for _, ps := range th.ProviderSessions {
		if ps.Status == domain.SessionStatusOpen {
			t.Errorf("%s: thread %s session %s is still open after a restart", when, th.ID, ps.ID)
		}
	}
}

// checkFrames finds each prompt the raw frames show sent to a provider
// (DATA/rawframes/SESSION.ndjson, session/prompt frames) and asserts that
// no run's prompt was sent twice, that each went to a session of the run's
// thread (the one its attempt was dispatched to, if recorded), that it is
// the run's input, after one of the thread's handoffs if anything comes
// before it, and that every run whose provider turn was bound was sent.
// Every run's input is unique in the sweep.
func (s *sweep) checkFrames(when string, threads []domain.Thread) {
	t := s.t
	type runAt struct {
		thread   *domain.Thread
		run      *domain.Run
		sessions map[string]bool
	}
	byInput := map[string]runAt{}
	for i := range threads {
		th := &threads[i]
		sessions := map[string]bool{}
		for _, ps := range th.ProviderSessions {
			sessions[ps.ID] = true
		}
		for j := range th.Runs {
			byInput[th.Runs[j].Input] = runAt{th, &th.Runs[j], sessions}
		}
	}
	files, err := filepath.Glob(filepath.Join(s.data, "rawframes", "*.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string][]string{} // run id: the sessions its prompt went to
	s.seen = map[string]int{}
	for _, f := range files {
		session := strings.TrimSuffix(filepath.Base(f), ".ndjson")
		for _, text := range promptsSent(t, f) {
			before, input := "", text
			if i := strings.LastIndex(text, "\n\n"); i >= 0 {
				before, input = text[:i], text[i+2:]
			}
			r, ok := byInput[input]
			if !ok {
				t.Errorf("%s: session %s was sent a prompt no run has as its input: %q", when, session, text)
				continue
			}
			sent[r.run.ID] = append(sent[r.run.ID], session)
			if !r.sessions[session] {
				t.Errorf("%s: run %s of thread %s was sent in session %s, not one of its thread's", when, r.run.ID, r.thread.ID, session)
			}
			for _, a := range r.run.Attempts {
				if a.SessionID != "" && a.SessionID != session {
					t.Errorf("%s: run %s was sent in session %s; its attempt %s was dispatched to %s", when, r.run.ID, session, a.ID, a.SessionID)
				}
			}
			if before != "" {
				s.seen["prompts sent after a handoff"]++
			}
			if before != "" && !slices.ContainsFunc(r.thread.Handoffs, func(h domain.ContextHandoff) bool { return h.Text == before }) {
				t.Errorf("%s: run %s was sent with a text before its input that is none of its thread's handoffs:\n%s", when, r.run.ID, before)
			}
		}
	}
	for _, th := range threads {
		bound := map[string]bool{}
		for _, pt := range th.ProviderTurns {
			bound[pt.AttemptID] = true
		}
		for _, r := range th.Runs {
			k := "runs " + string(r.Status)
			if r.Failure != nil {
				k += " " + r.Failure.Code
			}
			s.seen[k]++
			// One attempt per run in the sweep: at most one prompt.
			if len(sent[r.ID]) > 1 {
				t.Errorf("%s: run %s (thread %s, %q) was sent %d times, in sessions %q", when, r.ID, th.ID, r.Input, len(sent[r.ID]), sent[r.ID])
			}
			for _, a := range r.Attempts {
				if bound[a.ID] && len(sent[r.ID]) == 0 {
					t.Errorf("%s: run %s's turn is bound (attempt %s), but no raw frame shows its prompt sent", when, r.ID, a.ID)
				}
			}
		}
	}
}

// promptsSent are the texts of the session/prompt frames a raw-frame log
// shows sent to the provider; a last line cut by the kill does not count.
func promptsSent(t *testing.T, file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range bytes.Lines(b) {
		if !bytes.HasSuffix(l, []byte("\n")) {
			break
		}
		var fr struct {
			Dir   string `json:"dir"`
			Frame struct {
				Method string `json:"method"`
				Params struct {
					Prompt []struct {
						Text string `json:"text"`
					} `json:"prompt"`
				} `json:"params"`
			} `json:"frame"`
		}
		if err := json.Unmarshal(l, &fr); err != nil {
			t.Errorf("%s: a frame line is not JSON: %v\n%s", file, err, l)
			continue
		}
		if fr.Dir == "out" && fr.Frame.Method == "session/prompt" {
			var text []string
			for _, p := range fr.Frame.Params.Prompt {
				text = append(text, p.Text)
			}
			out = append(out, strings.Join(text, ""))
		}
	}
	return out
}

// promptsAnyText writes a copy of a transcript into dir whose
// session/prompt expectations take any prompt: each run's input is its
// own in the sweep, and a continuation after a killed run may carry a
// handoff of it (checkFrames checks the prompts sent).
func promptsAnyText(t *testing.T, file, dir string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n := 0
	for l := range bytes.Lines(b) {
		if bytes.Contains(l, []byte(`"type":"expect_outbound"`)) && bytes.Contains(l, []byte(`"method":"session/prompt"`)) {
			var e map[string]any
			if err := json.Unmarshal(l, &e); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			e["frame"].(map[string]any)["params"].(map[string]any)["prompt"] = "<any>"
			l, _ = json.Marshal(e)
			l = append(l, '\n')
			n++
		}
		out.Write(l)
	}
	if n == 0 {
		t.Fatalf("%s expects no session/prompt", file)
	}
	dst := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(dst, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// stateFile is the --state of a replay peer command.
func stateFile(argv []string) string {
	for i, a := range argv {
		if a == "--state" && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// resumeCursor is the replay peer's cursor at the transcript's second
// part: the entry after its first runtime_exit (entries are the lines
// after the transcript_start header).
func resumeCursor(t *testing.T, file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"type":"runtime_exit"`) {
			return i // line i (0-based) is entry i-1; the next entry is i
		}
	}
	t.Fatalf("%s has no runtime_exit: it has no second part to resume in", file)
	return 0
}

func gitInit(t *testing.T, dir string) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init %s: %v\n%s", dir, err, out)
	}
}
