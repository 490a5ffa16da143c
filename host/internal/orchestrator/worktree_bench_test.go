package orchestrator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/domain/domaintest"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk/plugintest"
)

// benchThreads is how many worktree threads BenchmarkWorktreeThreads runs
// on one repository.
const benchThreads = 8

// BenchmarkWorktreeThreads measures 8 threads on worktrees of one
// repository, each a replayed three-run ACP session (acp/multi_turn, whose
// second run writes a file: a commit on the thread's branch), from the
// first thread's creation to the last run's end. "parallel" starts them
// all at once, as 8 clients would; its baseline, "sequential", runs each
// thread to its end before it creates the next. The goal: parallel at
// least 3 times sooner. Each iteration has a repository of its own, so
// that its worktree list does not grow from one to the next.
//
// cpu-s/op is the CPU time an iteration used: in the host
// (host-cpu-s/op), its git commands (git-cpu-s/op), and the plugin with
// the replay peers (plugin-cpu-s/op). On a machine of N cores, parallel
// can take no less than cpu-s/op / N.
func BenchmarkWorktreeThreads(b *testing.B) {
	transcript, err := filepath.Abs(filepath.Join(root, "testdata", "acp", "multi_turn.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	var msgs []string
	for _, g := range plugintest.ReadGroups(b, filepath.Join(root, "testdata", "acp", "multi_turn.messages")) {
		msgs = append(msgs, g...)
	}
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "sequential", true: "parallel"}[parallel], func(b *testing.B) {
			h, err := orchestrator.Open(orchestrator.Config{DataDir: b.TempDir(), PluginDirs: []string{pluginDir},
				Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			argv := []string{peerBin, "--transcript", transcript, "--speed", "0"}
			cpu := newCPUMeter()
			iter := 0
			for b.Loop() {
				b.StopTimer()
				repo := benchRepo(b)
				iter++
				cpu.start()
				b.StartTimer()
				threads := make([]domain.Thread, benchThreads)
				errs := make([]error, benchThreads)
				run := func(i int) {
					threads[i], errs[i] = runWorktreeThread(h, fmt.Sprintf("%d-%d", iter, i), repo, argv, msgs)
				}
				if parallel {
					var wg sync.WaitGroup
					for i := range benchThreads {
						wg.Go(func() { run(i) })
					}
					wg.Wait()
				} else {
					for i := range benchThreads {
						run(i)
					}
				}
				b.StopTimer()
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
				cpu.stop(threads)
				b.StartTimer()
			}
			cpu.report(b, iter)
		})
	}
}

// runWorktreeThread creates a thread on a worktree of repo, sends it msgs
// and waits for its runs to end: each completed, the second with a commit
// on the thread's branch.
func runWorktreeThread(h *orchestrator.Host, name, repo string, argv, msgs []string) (domain.Thread, error) {
	ctx := context.Background()
	rc, err := h.Dispatch(ctx, domain.Command{ID: "create-" + name, Payload: domain.CreateThread{Provider: "acp", Cwd: repo,
		ProviderCommand: domain.ProviderCommand{Argv: argv}, ApprovalPolicy: domain.ApproveAccept, Worktree: &domain.WorktreeSpec{}}})
	if err != nil {
		return domain.Thread{}, fmt.Errorf("thread %s: create: %w", name, err)
	}
	for j, m := range msgs {
		if _, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprintf("send-%s-%d", name, j), ThreadID: rc.ThreadID,
			Payload: domain.DispatchMessage{Text: m, Mode: domain.ModeQueueAfterActive}}); err != nil {
			return domain.Thread{}, fmt.Errorf("thread %s: send: %w", name, err)
		}
	}
	th, err := awaitRuns(ctx, h, rc.ThreadID, len(msgs))
	if err != nil {
		return domain.Thread{}, fmt.Errorf("thread %s: %w", name, err)
	}
	for _, r := range th.Runs {
		if r.Status != domain.RunStatusCompleted {
			return domain.Thread{}, fmt.Errorf("thread %s: run %d %s: %+v", name, r.Ordinal, r.Status, r.Failure)
		}
	}
	if th.Runs[1].Commit == "" || th.Worktree.Head != th.Runs[1].Commit {
		return domain.Thread{}, fmt.Errorf("thread %s: the second run's commit %q, the branch's head %q", name, th.Runs[1].Commit, th.Worktree.Head)
	}
	return th, nil
}

// awaitRuns follows a thread until it has n runs, all ended with their
// checkpoints recorded.
func awaitRuns(ctx context.Context, h *orchestrator.Host, id string, n int) (domain.Thread, error) {
	ended := domaintest.Settled(n)
	th, seq, err := h.Snapshot(id)
	if err != nil || ended(th) {
		return th, err
	}
	for _, err := range h.ThreadStream(ctx, id, seq) {
		if err != nil {
			return th, err
		}
		if th, err = h.Thread(id); err != nil || ended(th) {
			return th, err
		}
	}
	return th, fmt.Errorf("the thread's stream ended before its %d runs", n)
}

// benchRepo makes a git repository with one commit whose README.md is the
// replayed workspaces' (their first write changes nothing).
func benchRepo(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README.md"},
		{"-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// cpuMeter adds up the CPU time iterations take: in this process (the
// host), in the processes it waited for (its git commands), and in the
// plugin processes with the replay peers they waited for. It reads
// /proc/PID/stat.
type cpuMeter struct {
	host, git, plugins time.Duration         // the sums
	atStart            times                 // this process's, at start
	pluginsAtStart     map[int]time.Duration // by plugin pid, own and reaped children's
}

// times are a process's own CPU time and its reaped children's.
type times struct{ own, children time.Duration }

func newCPUMeter() *cpuMeter { return &cpuMeter{pluginsAtStart: map[int]time.Duration{}} }

func (m *cpuMeter) start() {
	m.atStart = cpuTimes("self")
	for pid := range m.pluginsAtStart {
		t := cpuTimes(strconv.Itoa(pid))
		m.pluginsAtStart[pid] = t.own + t.children
	}
}

// stop adds what was used since start, by this process, its git commands
// and the plugin processes of the threads' sessions.
func (m *cpuMeter) stop(threads []domain.Thread) {
	now := cpuTimes("self")
	m.host += now.own - m.atStart.own
	m.git += now.children - m.atStart.children
	for _, th := range threads {
		for _, s := range th.ProviderSessions {
			if _, ok := m.pluginsAtStart[s.PluginPid]; !ok {
				m.pluginsAtStart[s.PluginPid] = 0 // started in this iteration
			}
		}
	}
	for pid, before := range m.pluginsAtStart {
		t := cpuTimes(strconv.Itoa(pid))
		m.plugins += t.own + t.children - before
	}
}

// report reports the sums per iteration: in all, and each part.
func (m *cpuMeter) report(b *testing.B, iterations int) {
	per := func(d time.Duration) float64 { return d.Seconds() / float64(iterations) }
	b.ReportMetric(per(m.host+m.git+m.plugins), "cpu-s/op")
	b.ReportMetric(per(m.host), "host-cpu-s/op")
	b.ReportMetric(per(m.git), "git-cpu-s/op")
	b.ReportMetric(per(m.plugins), "plugin-cpu-s/op")
}

// cpuTimes reads the user and system time of /proc/PID (or self) and of
// the children it waited for.
func cpuTimes(pid string) times {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return times{}
	}
	// Fields after the command's closing parenthesis: the state is the
	// first; utime, stime, cutime and cstime the 12th to the 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var ticks [4]int64
	for i, v := range f[11:15] {
		ticks[i], _ = strconv.ParseInt(v, 10, 64)
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	return times{own: tick(ticks[0] + ticks[1]), children: tick(ticks[2] + ticks[3])}
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux architecture Go runs on.
const clockTicks = 100
