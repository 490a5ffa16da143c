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
	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

// The SIGKILL sweep: the real baton binary, with the ACP, Codex and Claude
// plugins and the replay peer, killed with SIGKILL at random points of
// replayed sessions (prompts, approvals, steering, interrupts), all on one
// data dir. After each kill (and after the sweep) a host opened on the
// data dir must find:
//
//   - every event a killed or finished baton printed (baton run --json
//     prints each event once it is committed) in the log, at its sequence,
//     unchanged, and the log's sequences dense from 1, each thread's index
//     holding exactly its events of the global log;
//   - no run left starting, running or waiting: recovery ended each one the
//     killed host had in flight, as its turn had ended if run.completing
//     was committed (its status and failure), else failed with
//     host_restarted and the recovery's reason; no run left queued but a
//     steering message the recovery queued as a run of its own (it cannot
//     know whether the provider took it); and no provider session left
//     open;
//   - no provider side effect repeated or made up, whatever its kind: in
//     the raw frames of each provider session (DATA/rawframes/SESSION.ndjson)
//     every input sent (a prompt, or steering into a running turn) is one
//     of its thread's runs' inputs or user messages, after one of the
//     thread's handoffs if anything comes before it, and is sent once in
//     all the thread's sessions; every run whose provider turn was bound
//     was sent its input; each of the provider's own requests (approvals,
//     ACP's file writes) is answered at most once, no more approvals are
//     answered with a decision than the log decided (a plugin cancels a
//     request itself when it stops its provider) and none the log has
//     resolved after an answer is missing; no more interrupts are sent in a session than the
//     log asked of its attempts, and at least one in a session whose
//     provider ended a run interrupted; a session the log does not know was
//     sent none of these;
//   - no plugin or provider process outliving the killed host (the test
//     process is their subreaper and waits for them).
//
// The scenarios (sweepScenarios). A story thread replays a provider's
// resume transcript (testdata/{acp,codex,claude}/resume.ndjson, its
// prompts' expectations made "<any>": each run's input names its step,
// and a continuation may carry a handoff, below) from a copy of its own,
// with its own cursor file (replaypeer --state): the transcript's first
// part is a fresh conversation, its second a resumed one. Every baton
// invocation starts one provider process for one run, and a killed run is
// never sent again (recovery fails it; its prompt may or may not have
// reached the peer), so what the next process is asked is a function of
// the committed log alone: a thread whose provider thread is bound
// (provider.thread.bound) resumes it, one whose is not starts afresh.
// Before each continuation the test sets the thread's cursor to the
// matching part and sends that part's message; the peer then checks every
// frame the plugin sends, so a continuation that re-sent a killed turn,
// or resumed what was never bound, fails as a mismatch (a failed run, not
// host_restarted). A run killed after its prompt was dispatched but
// before the provider's turn was bound is one the provider's conversation
// is taken not to have seen: the thread's next run carries a handoff of
// it, before its input (full_thread_summary on a thread never bound,
// delta_since_target_last_seen on one resumed). A one-shot thread plays a
// scenario's script (testdata/P/NAME.steps.json, its real pauses left
// out) once, with baton run --script: approvals answered by the client
// (acp, codex, claude), native steering (codex, claude), steering by
// restart (acp), interrupts (acp, codex, claude).
//
// Kill points: after a random count of printed lines (each one a committed
// event for --json; baton send prints the readable stream), or after a
// random delay from the start (the store's open and the recovery of the
// last kill, before anything is printed). Half the kills of a one-shot
// come just after the event that decides its effect (request.answered,
// run.steered, run.restart.requested, run.interrupt.requested): between
// the decision and the effect, where a host that performed an effect
// twice, or one it had not decided, would show it. A check after a kill is
// skipped at random; the next invocation then starts a new thread and its
// host recovers the killed one (and may be killed while it does), and the
// next check verifies both.
//
// The handoff after a kill. A kill between a prompt's dispatch and its
// turn's binding is a window of milliseconds, so some story invocations
// aim at it. Claude binds the turn of a thread it has not bound yet from
// the provider's first frames after the prompt, after StartTurn returned
// (on a thread resumed it binds the turn as the prompt is sent, as ACP
// always does; Codex's StartTurn returns with the turn): an aimed
// invocation of a Claude story thread not bound yet plays a transcript
// whose provider takes the prompt and says nothing more, and is killed
// once attempt.dispatched is printed; the thread's next run, soon after,
// carries a full_thread_summary handoff of the killed one. The sweep fails
// if no prompt was ever sent after a handoff: once its kills are made, it
// goes on aiming until one is, for at most maxForced steps.
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

	s := &sweep{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), data: t.TempDir(), dir: t.TempDir(),
		played: map[string]*sweepScenario{}, stories: map[string]*story{}, threads: map[string]*sweepThread{},
		points: map[string]int{}, killed: map[string]int{}, aimed: map[string]bool{}, frames: map[string]framesRead{}, recovered: true}
	s.prepare()
	start := time.Now()
	n, runs, forced := 0, 0, 0
	for step := 0; n < kills || s.seen[handoffSent] == 0; step++ {
		if step > 4*kills {
			t.Fatalf("%d steps made only %d kills", step, n)
		}
		// The kills are made and no prompt went after a handoff: aim at it
		// until one does.
		force := n >= kills
		if force {
			if forced++; forced > maxForced {
				t.Fatalf("the handoff after a killed dispatch never ran: %d steps past the kills aimed at it, and no prompt "+
					"was sent after a handoff (replay with BATON_SIGKILL_SEED=%d)", maxForced, seed)
			}
		}
		inv := s.step(step, force)
		runs++
		if inv.killed {
			n++
			s.points[inv.point]++
			s.killed[inv.scenario]++
		}
		// Reopen and check after most kills; else the next invocation's
		// host recovers the killed one, and the next check sees both.
		if !inv.killed || force || s.rng.IntN(4) > 0 {
			s.check(fmt.Sprintf("step %d (%s)", step, inv))
		} else {
			s.recovered = false
		}
		if t.Failed() {
			t.Fatalf("stopped at step %d; replay with BATON_SIGKILL_SEED=%d", step, seed)
		}
	}
	s.check("the end")
	t.Logf("%d kills in %d invocations on %d threads, %d printed events checked, %v; killed after:%s\nkilled in:%s\nfound:%s",
		n, runs, len(s.threads), len(s.printed), time.Since(start).Round(time.Millisecond), counts(s.points), counts(s.killed), counts(s.seen))
}

// counts lists a tally, one key a line, in key order.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %3d  %s", m[k], k)
	}
	return b.String()
}

const (
	// handoffSent is what checkFrames counts the prompts sent after a
	// handoff as.
	handoffSent = "prompts sent after a handoff"
	// requeuedSent is what checkFrames counts the steering messages a
	// recovery queued as runs of their own after they were sent as.
	requeuedSent = "steering queued again after it was sent"
	// maxForced bounds the steps a sweep makes past its kills to see a
	// prompt sent after a handoff: two make one (a killed dispatch, then
	// its thread continued).
	maxForced = 10
)

// sweepScenario is what a thread of the sweep plays:
// testdata/PROVIDER/NAME.ndjson.
type sweepScenario struct {
	provider, name string
	// oneShot: NAME.steps.json is played with --script, once, on a thread
	// of its own; else NAME is a story, continued (see above).
	oneShot bool
	// lines is about how many lines a finished invocation prints: kill
	// points are drawn up to a few past it.
	lines int
	// decides is the event that decides a one-shot's provider effect.
	decides string
}

func (sc *sweepScenario) String() string { return sc.provider + "/" + sc.name }

var sweepScenarios = []*sweepScenario{
	{provider: "acp", name: "resume", lines: 25},
	{provider: "codex", name: "resume", lines: 25},
	{provider: "claude", name: "resume", lines: 26},
	{provider: "acp", name: "approval_accept", oneShot: true, lines: 33, decides: "request.answered"},
	{provider: "codex", name: "approval_accept", oneShot: true, lines: 44, decides: "request.answered"},
	{provider: "claude", name: "approval_accept", oneShot: true, lines: 32, decides: "request.answered"},
	{provider: "codex", name: "message_steering", oneShot: true, lines: 27, decides: "run.steered"},
	{provider: "claude", name: "message_steering", oneShot: true, lines: 32, decides: "run.steered"},
	{provider: "acp", name: "steering_restart_fallback", oneShot: true, lines: 32, decides: "run.restart.requested"},
	{provider: "acp", name: "turn_interrupt", oneShot: true, lines: 21, decides: "run.interrupt.requested"},
	{provider: "codex", name: "turn_interrupt", oneShot: true, lines: 20, decides: "run.interrupt.requested"},
	{provider: "claude", name: "turn_interrupt", oneShot: true, lines: 21, decides: "run.interrupt.requested"},
}

// aimsAtDispatch says whether a story's provider, on a thread not bound
// yet, leaves a window between a prompt's dispatch and its turn's binding
// that a silent provider widens (see above).
func aimsAtDispatch(provider string) bool { return provider == "claude" }

type sweep struct {
	t         *testing.T
	rng       *rand.Rand
	data, dir string
	stories   map[string]*story // by provider
	// played is the scenario of each transcript a thread plays (its
	// provider command's --transcript): a one-shot's, a story thread's own
	// copy.
	played map[string]*sweepScenario
	// threads are the threads the last check found, by id.
	threads map[string]*sweepThread
	// recovered says a check has reopened the data dir since the last
	// kill: every thread's state is known.
	recovered bool
	// printed is every event a baton printed, in the order printed.
	printed []eventlog.Record
	// points counts the kills by what was printed last; killed, by
	// scenario.
	points, killed map[string]int
	// created counts the threads made, invocations the story invocations.
	created, invocations int
	// aimed are the story threads killed between a prompt's dispatch and
	// its turn's binding, on purpose, and not continued since.
	aimed map[string]bool
	// seen counts what the last check found: runs by how they ended,
	// effects sent, prompts sent with a handoff before them.
	seen map[string]int
	// frames are the raw-frame logs read, by file.
	frames map[string]framesRead
}

// framesRead is what a raw-frame log of size bytes showed sent.
type framesRead struct {
	size int64
	sent effects
}

// story is a provider's resume transcript as the sweep plays it.
type story struct {
	sc *sweepScenario
	// plain has its prompts' expectations made "<any>" and no pauses;
	// aimed is its fresh part with the provider silent after the prompt.
	plain, aimed []byte
	resumeAt     int // plain's cursor at its resumed part
	// turns are the turn ids the provider gives (Codex's): each
	// invocation plays them made its own, since a provider never starts
	// two turns of a thread with one ref.
	turns []string
}

type sweepThread struct {
	id string
	sc *sweepScenario
	// A story thread's own transcript and cursor files.
	transcript, state string
	bound             bool // its provider thread is bound: a continuation resumes it
}

type invocation struct {
	args     []string
	scenario string
	killed   bool
	point    string // what was printed last before the kill
	stdout   []string
	stderr   string
	code     int
}

func (inv invocation) String() string {
	what := "finished"
	if inv.killed {
		what = "killed after " + inv.point
	}
	return fmt.Sprintf("%s: baton %s: %s", inv.scenario, strings.Join(inv.args, " "), what)
}

// Lines printed by baton send (the readable stream) about: the kill point
// is drawn up to a few past them, so that some invocations finish.
const sendLines = 6

// killPlan is when an invocation is killed: after its first lines lines,
// or after the first line of an event type in after and extra lines more,
// or after delay; never if none is set.
type killPlan struct {
	lines int
	after []string
	extra int
	delay time.Duration
}

// prepare writes what the scenarios play: each story's transcripts, each
// one-shot's script without its pauses.
func (s *sweep) prepare() {
	for _, sc := range sweepScenarios {
		if !sc.oneShot {
			s.stories[sc.provider] = storyOf(s.t, sc)
			continue
		}
		file, err := filepath.Abs(filepath.Join(root, "testdata", sc.provider, sc.name+".ndjson"))
		if err != nil {
			s.t.Fatal(err)
		}
		s.played[file] = sc
		b, err := os.ReadFile(strings.TrimSuffix(file, ".ndjson") + ".steps.json")
		if err != nil {
			s.t.Fatal(err)
		}
		var script map[string]any
		if err := json.Unmarshal(b, &script); err != nil {
			s.t.Fatalf("%s's script: %v", sc, err)
		}
		steps, _ := script["steps"].([]any)
		script["steps"] = slices.DeleteFunc(steps, func(st any) bool {
			_, pause := st.(map[string]any)["sleepMs"]
			return pause
		})
		b, _ = json.Marshal(script)
		if err := os.WriteFile(s.scriptFile(sc), b, 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *sweep) scriptFile(sc *sweepScenario) string {
	return filepath.Join(s.dir, sc.provider+"-"+sc.name+".steps.json")
}

// step runs one baton invocation and kills it at a random point. With
// force it aims at the handoff after a killed dispatch: it continues a
// thread killed so, without killing it, or kills a new one so.
func (s *sweep) step(step int, force bool) invocation {
	s.t.Helper()
	var stories, aimed []string
	for id, th := range s.threads {
		if th.sc.oneShot {
			continue
		}
		stories = append(stories, id)
		if s.aimed[id] {
			aimed = append(aimed, id)
		}
	}
	slices.Sort(stories)
	slices.Sort(aimed)
	var th *sweepThread // a story thread continued
	var sc *sweepScenario
	switch {
	case s.recovered && len(aimed) > 0 && (force || s.rng.IntN(2) == 0):
		th = s.threads[aimed[s.rng.IntN(len(aimed))]]
	case force:
		sc = s.stories["claude"].sc
	case !s.recovered || len(stories) == 0 || s.rng.IntN(2) == 0:
		sc = sweepScenarios[s.rng.IntN(len(sweepScenarios))]
	default:
		th = s.threads[stories[s.rng.IntN(len(stories))]]
	}
	if th != nil {
		sc = th.sc
		delete(s.aimed, th.id)
	}
	// A continuation of an aimed thread is not killed when forced: its
	// prompt must be sent.
	aim := !sc.oneShot && aimsAtDispatch(sc.provider) && (th == nil || !th.bound) && (force && th == nil || !force && s.rng.IntN(3) == 0)
	msg := fmt.Sprintf("step %d: remember the word: pineapple.", step)
	var args []string
	most, jsonOut := sc.lines, true
	switch {
	case sc.oneShot:
		ws := s.workspace()
		cmd := s.peerCommand(filepath.Join(root, "testdata", sc.provider, sc.name+".ndjson"), "--speed", "0")
		args = []string{"run", "--json", "--data", s.data, "--cwd", ws, "--provider", sc.provider, "--provider-command", cmd,
			"--script", s.scriptFile(sc)}
	case th == nil:
		// A new story thread, with its own transcript and cursor files;
		// its id is known once it is created.
		ws := s.workspace()
		nt := &sweepThread{sc: sc, transcript: filepath.Join(s.dir, fmt.Sprintf("story%d.ndjson", s.created)),
			state: filepath.Join(s.dir, fmt.Sprintf("cursor%d", s.created))}
		s.played[nt.transcript] = sc
		s.writeStory(nt, false, aim)
		cmd := s.peerCommand(nt.transcript, "--speed", "1", "--state", nt.state)
		args = []string{"run", "--json", "--data", s.data, "--cwd", ws, "--provider", sc.provider, "--provider-command", cmd, msg}
	default:
		if th.bound {
			msg = fmt.Sprintf("step %d: what was the word?", step)
		}
		s.writeStory(th, th.bound, aim)
		if !aim && !force && s.rng.IntN(3) == 0 {
			args, jsonOut, most = []string{"send", "--data", s.data, th.id, msg}, false, sendLines
		} else {
			args = []string{"run", "--json", "--data", s.data, "--thread", th.id, msg}
		}
	}
	var kill killPlan
	switch {
	case force && !aim:
	case aim:
		// Or at the turn's binding, should it come first: then the aim
		// missed, but the silent provider does not hold the sweep.
		kill.after = []string{"attempt.dispatched", "provider.turn.bound"}
	case sc.oneShot && s.rng.IntN(2) == 0:
		kill.after, kill.extra = []string{sc.decides}, s.rng.IntN(2)
	case s.rng.IntN(4) == 0:
		kill.delay = time.Duration(1+s.rng.IntN(400)) * time.Millisecond
	default:
		kill.lines = 1 + s.rng.IntN(most+3)
	}
	inv := s.invoke(args, kill)
	inv.scenario = sc.String()
	if aim {
		inv.scenario += " (aimed at the dispatch)"
	}
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
		pl, err := readPrinted([]byte(l))
		if err != nil {
			s.t.Errorf("step %d: %s: line %d is not an event: %v\n%s", step, inv, i+1, err, l)
			continue
		}
		rec := pl.Record
		if rec.Sequence <= last {
			s.t.Errorf("step %d: %s: printed sequence %d after %d", step, inv, rec.Sequence, last)
		}
		last = rec.Sequence
		s.printed = append(s.printed, rec)
		if aim && inv.killed && th == nil && rec.Type == "thread.created" {
			s.aimed[rec.ThreadID] = true
		}
	}
	if aim && inv.killed && th != nil {
		s.aimed[th.id] = true
	}
	s.reapOrphans(step)
	return inv
}

// workspace makes a new thread's git workspace.
func (s *sweep) workspace() string {
	s.created++
	ws := filepath.Join(s.dir, fmt.Sprintf("ws%d", s.created))
	gitInit(s.t, ws)
	return ws
}

// peerCommand is the replay peer playing file, with flags, and the
// arguments the transcript needs after them.
func (s *sweep) peerCommand(file string, flags ...string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		s.t.Fatal(err)
	}
	tr, err := transcript.ReadFile(abs)
	if err != nil {
		s.t.Fatal(err)
	}
	quoted := []string{"'" + filepath.Join(binDir, "replaypeer") + "'", "--transcript", "'" + abs + "'"}
	return strings.Join(append(append(quoted, flags...), replay.PeerArgs(tr)...), " ")
}

// writeStory sets a story thread's transcript (its turn ids this
// invocation's) and its cursor for the next invocation: at its fresh part
// (aimed, or not), or at its resumed part.
func (s *sweep) writeStory(th *sweepThread, resumed, aimed bool) {
	st := s.stories[th.sc.provider]
	b, cursor := st.plain, 0
	switch {
	case aimed:
		b = st.aimed
	case resumed:
		cursor = st.resumeAt
	}
	s.invocations++
	for _, id := range st.turns {
		own := fmt.Sprintf("%s%012x", id[:max(len(id)-12, 0)], s.invocations)
		b = bytes.ReplaceAll(b, []byte(id), []byte(own))
	}
	if err := os.WriteFile(th.transcript, b, 0o600); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(th.state, fmt.Appendf(nil, `{"cursor":%d}`, cursor), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// invoke runs baton and sends it SIGKILL as kill says: all it printed up
// to its death is read.
func (s *sweep) invoke(args []string, kill killPlan) invocation {
	s.t.Helper()
	inv := invocation{args: args, point: "start"}
	if kill.delay > 0 {
		inv.point = fmt.Sprintf("a delay (%v)", kill.delay.Round(10*time.Millisecond))
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
	if kill.delay > 0 {
		timer = time.After(kill.delay)
	}
	sigkill := func() {
		if !inv.killed {
			cmd.Process.Signal(syscall.SIGKILL)
			inv.killed = true
		}
	}
	after := -1 // lines since the line kill.after names
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
			switch {
			case after >= 0:
				after++
			case slices.Contains(kill.after, eventType(l)):
				after = 0
			}
			if len(inv.stdout) == kill.lines || after == kill.extra {
				sigkill()
			}
		case <-timer:
			sigkill()
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

// eventType is the type of the event a --json line prints ("" for any
// other line).
func eventType(l string) string {
	var e struct {
		Type string `json:"type"`
	}
	json.Unmarshal([]byte(l), &e)
	return e.Type
}

// linePoint names the kill point after a printed line: the event's type
// (with a node's kind), or the readable line's first word.
func linePoint(l string) string {
	pl, err := readPrinted([]byte(l))
	if err != nil {
		f := strings.Fields(l)
		if len(f) == 0 {
			return "send: an empty line"
		}
		return "send: a line " + strconv.Quote(f[0])
	}
	var data struct {
		Kind   string `json:"kind"`
		Status string `json:"status"`
	}
	json.Unmarshal(pl.Record.Data, &data)
	switch typ := pl.Record.Type; {
	case pl.Kind == "thread":
		return "the final projection"
	case typ == "node.started":
		return typ + " " + data.Kind
	case typ == "node.completed" || typ == "run.ended":
		return typ + " " + data.Status
	}
	return pl.Record.Type
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
	s.recovered, s.seen = true, map[string]int{}

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
	events := map[string][]eventlog.Record{}
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
		file := flagValue(th.ProviderCommand.Argv, "--transcript")
		sc := s.played[file]
		if sc == nil {
			t.Fatalf("%s: thread %s plays %q, which is no scenario's transcript: %q", when, th.ID, file, th.ProviderCommand.Argv)
		}
		st := &sweepThread{id: th.ID, sc: sc, transcript: file, bound: len(th.ProviderThreads) > 0}
		if !sc.oneShot {
			if st.state = flagValue(th.ProviderCommand.Argv, "--state"); st.state == "" {
				t.Fatalf("%s: story thread %s's provider command has no --state: %q", when, th.ID, th.ProviderCommand.Argv)
			}
		}
		threads[th.ID] = st
		// The frames are checked against everything the log holds: the
		// host's projection has left its older runs and their sessions.
		every, err := fold(own, true)
		if err != nil {
			t.Fatalf("%s: thread %s: %v", when, th.ID, err)
		}
		projections = append(projections, every)
		events[th.ID] = own
	}
	s.threads = threads
	s.checkFrames(when, projections, events)
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

// requeueReasons are why a steering message is queued as a run of its own
// when a host's recovery ends its run: the recovery cancelled its steer,
// not knowing whether the provider took it, or the run it waited to
// restart with ended.
var requeueReasons = []string{
	"the host restarted before it was known to have reached the provider",
	"the run ended (failed) before its turn could restart with it",
}

// checkThread asserts that nothing of a thread is left in flight after a
// host's recovery: each run ended as its turn ended (run.completing said
// how) or failed with host_restarted and the recovery's reason, or is a
// steering message the recovery queued; each session ended.
func (s *sweep) checkThread(when string, th domain.Thread, evs []eventlog.Record) {
	t := s.t
	outcomes := map[string]domain.RunOutcome{}
	steering := map[string]bool{} // message ids
	for _, r := range evs {
		switch r.Type {
		case "run.completing":
			var d domain.RunCompleting
			json.Unmarshal(r.Data, &d)
			outcomes[d.RunID] = d.RunOutcome
		case "run.steered":
			var d domain.RunSteered
			json.Unmarshal(r.Data, &d)
			steering[d.MessageID] = true
		case "run.restart.requested":
			var d domain.RestartRequested
			json.Unmarshal(r.Data, &d)
			steering[d.MessageID] = true
		}
	}
	requeued := slices.ContainsFunc(th.Diagnostics, func(d domain.Diagnostic) bool {
		return strings.HasSuffix(d.Title, " was queued as a run of its own") && slices.Contains(requeueReasons, d.Text)
	})
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
		if r.Status == domain.RunStatusQueued {
			if !steering[r.MessageID] || !requeued {
				t.Errorf("%s: thread %s run %d (%s) is left queued; only a steering message a recovery queued may be (diagnostics %+v)",
					when, th.ID, r.Ordinal, r.ID, th.Diagnostics)
			}
			continue
		}
		want := end{Status: domain.RunStatusFailed, Code: "host_restarted", Message: recoverReason}
		if o, ok := outcomes[r.ID]; ok {
			want = end{Status: o.Status}
			if o.Failure != nil {
				want.Code, want.Message = o.Failure.Code, o.Failure.Message
			}
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

// checkFrames finds the effects the raw frames show sent to each provider
// session (sentEffects) and asserts, thread by thread, that none was
// repeated or made up, and that none the log says happened is missing
// (see the sweep's doc). Every story run's input is unique in its thread.
func (s *sweep) checkFrames(when string, threads []domain.Thread, events map[string][]eventlog.Record) {
	t := s.t
	files, err := filepath.Glob(filepath.Join(s.data, "rawframes", "*.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]effects{} // by session
	for _, f := range files {
		// A log is only appended to: one of the size read before is read.
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := s.frames[f]; !ok || r.size != fi.Size() {
			s.frames[f] = framesRead{size: fi.Size(), sent: sentEffects(t, f)}
		}
		sent[strings.TrimSuffix(filepath.Base(f), ".ndjson")] = s.frames[f].sent
	}
	known := map[string]bool{}
	for i := range threads {
		th := &threads[i]
		for _, ps := range th.ProviderSessions {
			known[ps.ID] = true
		}
		s.checkThreadFrames(when, th, events[th.ID], sent)
	}
	for session, e := range sent {
		if !known[session] && (len(e.inputs) > 0 || len(e.answers) > 0 || e.interrupts > 0) {
			t.Errorf("%s: session %s, which the log does not know, was sent %+v", when, session, e)
		}
	}
}

// checkThreadFrames is checkFrames for one thread, its events and what its
// sessions were sent.
func (s *sweep) checkThreadFrames(when string, th *domain.Thread, evs []eventlog.Record, sent map[string]effects) {
	t := s.t
	texts := map[string]bool{} // what the thread may send: its runs' inputs, its user messages
	for _, r := range th.Runs {
		texts[r.Input] = true
	}
	for _, m := range th.Messages {
		if m.Role == domain.RoleUser {
			texts[m.Text.String()] = true
		}
	}
	sessionOf := map[string]string{} // attempt id: the session it was dispatched to
	for _, r := range th.Runs {
		for _, a := range r.Attempts {
			sessionOf[a.ID] = a.SessionID
		}
	}
	stops := map[string]int{} // by session: interrupts the log asked of its attempts
	for _, r := range evs {
		var d struct {
			AttemptID string `json:"attemptId"`
		}
		if r.Type == "run.interrupt.requested" || r.Type == "run.restart.requested" {
			json.Unmarshal(r.Data, &d)
			stops[sessionOf[d.AttemptID]]++
		}
	}
	interrupted := map[string]int{} // by session: runs its provider ended interrupted
	for _, r := range evs {
		if r.Type == "run.completing" {
			var d domain.RunCompleting
			json.Unmarshal(r.Data, &d)
			if d.Status == domain.RunStatusInterrupted {
				interrupted[sessionOf[d.AttemptID]]++
			}
		}
	}
	inputs := map[string][]string{} // input: the sessions it was sent in
	for _, ps := range th.ProviderSessions {
		e := sent[ps.ID]
		for _, text := range e.inputs {
			before, input := "", text
			if i := strings.LastIndex(text, "\n\n"); i >= 0 {
				before, input = text[:i], text[i+2:]
			}
			if !texts[input] {
				t.Errorf("%s: session %s of thread %s was sent %q, which is no input or message of the thread", when, ps.ID, th.ID, text)
				continue
			}
			inputs[input] = append(inputs[input], ps.ID)
			if before != "" {
				s.seen[handoffSent]++
				if !slices.ContainsFunc(th.Handoffs, func(h domain.ContextHandoff) bool { return h.Text == before }) {
					t.Errorf("%s: session %s of thread %s was sent a text before %q that is none of its thread's handoffs:\n%s",
						when, ps.ID, th.ID, input, before)
				}
			}
		}
		for id, n := range e.answers {
			if n > 1 {
				t.Errorf("%s: session %s of thread %s answered the provider's request %s %d times", when, ps.ID, th.ID, id, n)
			}
		}
		var decided, resolved int
		for _, q := range th.Requests {
			if q.SessionID == ps.ID && q.AnsweredBy != "" {
				decided++
				if q.Status == domain.RequestStatusResolved {
					resolved++
				}
			}
		}
		if e.approvals > decided || e.approvals < resolved {
			t.Errorf("%s: session %s of thread %s was sent %d answers to approvals; the log decided %d, of which %d resolved",
				when, ps.ID, th.ID, e.approvals, decided, resolved)
		}
		if e.interrupts > stops[ps.ID] || interrupted[ps.ID] > 0 && e.interrupts == 0 {
			t.Errorf("%s: session %s of thread %s was sent %d interrupts; the log asked %d, and its provider ended %d runs interrupted",
				when, ps.ID, th.ID, e.interrupts, stops[ps.ID], interrupted[ps.ID])
		}
		s.seen["answers sent"] += e.approvals
		s.seen["interrupts sent"] += e.interrupts
	}
	bound := map[string]bool{}
	for _, pt := range th.ProviderTurns {
		bound[pt.AttemptID] = true
	}
	for input, sessions := range inputs {
		if len(sessions) > 1 {
			t.Errorf("%s: thread %s sent %q %d times, in sessions %q", when, th.ID, input, len(sessions), sessions)
		}
		s.seen["inputs sent"]++
	}
	for _, r := range th.Runs {
		// A steering message a recovery queued as a run of its own after
		// its provider was sent it (the kill came between the write and
		// the steer's removal from the outbox): the run, once started (by
		// an unattended host as it opens, or by the thread's next
		// message), sends it again, and the check above fails then. The
		// sweep never starts it; it tallies them.
		if r.Status == domain.RunStatusQueued && len(inputs[r.Input]) > 0 {
			s.seen[requeuedSent]++
		}
		k := "runs " + string(r.Status)
		if r.Failure != nil {
			k += " " + r.Failure.Code
		}
		s.seen[k]++
		for _, a := range r.Attempts {
			if bound[a.ID] && len(inputs[r.Input]) == 0 {
				t.Errorf("%s: run %s's turn is bound (attempt %s), but no raw frame shows its input sent", when, r.ID, a.ID)
			}
			for _, session := range inputs[r.Input] {
				if a.SessionID != "" && a.SessionID != session {
					t.Errorf("%s: run %s was sent in session %s; its attempt %s was dispatched to %s", when, r.ID, session, a.ID, a.SessionID)
				}
			}
		}
	}
}

// effects are what a session's provider was sent that it acts on.
type effects struct {
	// inputs are the texts of the prompts and the steering sent, in order.
	inputs []string
	// interrupts counts the requests to stop a turn.
	interrupts int
	// answers counts the answers to each of the provider's requests, by
	// its id; approvals counts those of them that answer an approval with
	// a decision (not a cancellation: see sentEffects).
	answers   map[string]int
	approvals int
}

// sentEffects reads what a raw-frame log shows sent to the provider (the
// protocol of each frame told by its shape: JSON-RPC for ACP and Codex,
// Claude Code's stream-json); a last line cut by the kill does not count.
func sentEffects(t *testing.T, file string) effects {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	e := effects{answers: map[string]int{}}
	requests := map[string]string{} // the provider's, by id: the method (or control request subtype)
	for l := range bytes.Lines(b) {
		if !bytes.HasSuffix(l, []byte("\n")) {
			break
		}
		var fr struct {
			Dir   string `json:"dir"`
			Frame struct {
				// JSON-RPC
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Prompt []struct{ Text string } `json:"prompt"` // ACP's session/prompt
					Input  []struct{ Text string } `json:"input"`  // Codex's turn/start, turn/steer
				} `json:"params"`
				Result json.RawMessage `json:"result"`
				// Claude Code
				Type      string `json:"type"`
				RequestID string `json:"request_id"`
				Request   struct {
					Subtype string `json:"subtype"`
				} `json:"request"`
				Response struct {
					RequestID string `json:"request_id"`
				} `json:"response"`
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			} `json:"frame"`
		}
		if err := json.Unmarshal(l, &fr); err != nil {
			t.Errorf("%s: a frame line is not JSON: %v\n%s", file, err, l)
			continue
		}
		f := fr.Frame
		// An answer that cancels a request is the plugin's own, to a
		// provider it stops (ACP's, on an interrupt or its close): not
		// one the log decides.
		answer := func(id string, cancels bool) {
			if m, ok := requests[id]; ok {
				e.answers[id]++
				approval := m == "session/request_permission" || strings.HasSuffix(m, "/requestApproval") || m == "can_use_tool"
				if approval && !cancels {
					e.approvals++
				}
			}
		}
		texts := func(parts []struct{ Text string }) {
			var s []string
			for _, p := range parts {
				s = append(s, p.Text)
			}
			e.inputs = append(e.inputs, strings.Join(s, ""))
		}
		switch {
		case fr.Dir == "in" && f.Method != "" && len(f.ID) > 0:
			requests[string(f.ID)] = f.Method
		case fr.Dir == "in" && f.Type == "control_request":
			requests[f.RequestID] = f.Request.Subtype
		case fr.Dir != "out":
		case f.Method == "session/prompt":
			texts(f.Params.Prompt)
		case f.Method == "turn/start" || f.Method == "turn/steer":
			texts(f.Params.Input)
		case f.Method == "session/cancel" || f.Method == "turn/interrupt":
			e.interrupts++
		case f.Method == "" && len(f.ID) > 0:
			var r struct {
				Outcome struct {
					Outcome string `json:"outcome"`
				} `json:"outcome"` // ACP's permission answer
				Decision json.RawMessage `json:"decision"` // Codex's
			}
			json.Unmarshal(f.Result, &r) // a result of another shape cancels nothing
			answer(string(f.ID), r.Outcome.Outcome == "cancelled" || string(r.Decision) == `"cancel"`)
		case f.Type == "user":
			e.inputs = append(e.inputs, contentText(t, file, f.Message.Content))
		case f.Type == "control_request" && f.Request.Subtype == "interrupt":
			e.interrupts++
		case f.Type == "control_response":
			answer(f.Response.RequestID, false)
		}
	}
	return e
}

// contentText is the text of a Claude Code user message's content: a
// string, or text blocks.
func contentText(t *testing.T, file string, c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &blocks); err != nil {
		t.Errorf("%s: a user message's content is neither text nor blocks: %s", file, c)
	}
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}

// storyOf reads a story's resume transcript and makes what the sweep
// plays of it: its prompts' expectations take any prompt (each run's input
// is its own in the sweep, and a continuation after a killed run may carry
// a handoff of it: checkFrames checks the prompts sent), it has no pauses,
// and in its aimed form it is its fresh part up to the prompt: the
// provider takes it and says nothing more, until its stdin closes.
func storyOf(t *testing.T, sc *sweepScenario) *story {
	file := filepath.Join(root, "testdata", sc.provider, sc.name+".ndjson")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := slices.Collect(bytes.Lines(b))
	st := &story{sc: sc}
	// The transcript's parts, each up to its runtime_exit, and where
	// each part's prompt is.
	var parts [][][]byte
	var prompts []int
	part := [][]byte{}
	for i, l := range lines[1:] {
		var e map[string]any
		d := json.NewDecoder(bytes.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&e); err != nil {
			t.Fatalf("%s: line %d: %v", file, i+2, err)
		}
		delete(e, "afterMs")
		switch e["type"] {
		case transcript.TypeExpectOutbound:
			if anyPromptFrame(e["frame"].(map[string]any)) {
				prompts = append(prompts, len(part))
			}
		case transcript.TypeEmitInbound:
			if f, _ := e["frame"].(map[string]any); f["method"] == "turn/started" {
				turn, _ := f["params"].(map[string]any)["turn"].(map[string]any)
				if id, _ := turn["id"].(string); id != "" {
					st.turns = append(st.turns, id)
				}
			}
		}
		line, _ := json.Marshal(e)
		part = append(part, append(line, '\n'))
		if e["type"] == transcript.TypeRuntimeExit {
			parts, part = append(parts, part), [][]byte{}
		}
	}
	if len(parts) != 2 || len(part) > 0 || len(prompts) != 2 {
		t.Fatalf("%s has %d parts (and %d entries after the last) and %d prompts; a story has a fresh part and a resumed one, "+
			"a prompt in each", file, len(parts), len(part), len(prompts))
	}
	st.plain = bytes.Join(append([][]byte{lines[0]}, append(parts[0], parts[1]...)...), nil)
	st.resumeAt = len(parts[0])
	silent := []byte(`{"type":"runtime_exit","status":"success","wait":"stdin_close"}` + "\n")
	st.aimed = bytes.Join(append([][]byte{lines[0]}, append(slices.Clone(parts[0][:prompts[0]+1]), silent)...), nil)
	return st
}

// anyPromptFrame makes a prompt's expected frame take any input, and says
// whether it was one: ACP's session/prompt, Codex's turn/start, Claude
// Code's user message.
func anyPromptFrame(frame map[string]any) bool {
	params, _ := frame["params"].(map[string]any)
	switch {
	case frame["method"] == "session/prompt":
		params["prompt"] = "<any>"
	case frame["method"] == "turn/start":
		params["input"] = "<any>"
	case frame["type"] == "user":
		frame["message"].(map[string]any)["content"] = "<any>"
	default:
		return false
	}
	return true
}

// flagValue is the value after flag in a command's arguments.
func flagValue(argv []string, flag string) string {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

func gitInit(t *testing.T, dir string) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init %s: %v\n%s", dir, err, out)
	}
}

// promptsAnyText writes a copy of a transcript into dir whose prompts'
// expectations take any prompt (anyPromptFrame), and returns its path.
func promptsAnyText(t *testing.T, file, dir string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n := 0
	for l := range bytes.Lines(b) {
		if bytes.Contains(l, []byte(`"type":"`+transcript.TypeExpectOutbound+`"`)) {
			var e map[string]any
			d := json.NewDecoder(bytes.NewReader(l))
			d.UseNumber()
			if err := d.Decode(&e); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if f, _ := e["frame"].(map[string]any); f != nil && anyPromptFrame(f) {
				l, _ = json.Marshal(e)
				l = append(l, '\n')
				n++
			}
		}
		out.Write(l)
	}
	if n == 0 {
		t.Fatalf("%s expects no prompt", file)
	}
	dst := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(dst, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// promptsSent are the texts of the prompts and steering a raw-frame log
// shows sent to the provider (sentEffects); a last line cut by a kill
// does not count.
func promptsSent(t *testing.T, file string) []string {
	t.Helper()
	return sentEffects(t, file).inputs
}
