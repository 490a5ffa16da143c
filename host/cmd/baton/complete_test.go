//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// waiting is a thread whose run 1 waits for the answer to a request.
type waiting struct {
	data, thread, cwd, run, request, title string
}

// The lines of cobra's __complete: the values, then the directive (36: no
// file names, keep this order; 4: no file names, nothing to offer).
const (
	offered = ":36\n"
	nothing = ":4\n"
	// completionDone is what cobra's __complete says on stderr; a
	// completion adds nothing to it (no error of its own).
	completionDone = "Completion ended with directive: ShellCompDirectiveNoFileComp, ShellCompDirectiveKeepOrder\n"
	nothingDone    = "Completion ended with directive: ShellCompDirectiveNoFileComp\n"
)

// lockedPluginDir is a plugin directory holding a plugin of its own, mine
// (acp's binary under another name), locked.
func lockedPluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(binDir, "baton-plugin-acp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "baton-plugin-mine"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := baton(t, "plugin", "lock", dir); code != exitOK {
		t.Fatalf("plugin lock: exit %d\n%s%s", code, out, errOut)
	}
	return dir
}

// checkCompletions completes each verb's thread, request, provider and run
// arguments on a data dir where w waits, with extra as a plugin directory
// of the host that answers (the service's own, or given to the command).
func checkCompletions(t *testing.T, w waiting, args ...string) {
	t.Helper()
	thread := w.thread + "\tacp · waiting · " + w.cwd + "\n"
	providers := "acp\nclaude\ncodex\ncursor\nmine\nopencode\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show", ""}, thread + offered},
		{[]string{"watch", "thr_"}, thread + offered},
		{[]string{"send", ""}, thread + offered},
		{[]string{"send", w.thread, ""}, nothing}, // the message
		{[]string{"show", "thr_zz"}, offered},
		{[]string{"interrupt", ""}, thread + offered},
		{[]string{"cancel", ""}, thread + offered},
		{[]string{"diff", ""}, thread + offered},
		{[]string{"rollback", ""}, thread + offered},
		{[]string{"switch", ""}, thread + offered},
		{[]string{"run", "--thread", ""}, thread + offered},
		{[]string{"threads", "--after", ""}, thread + offered},
		{[]string{"approve", ""}, w.request + "\t" + w.thread + " run 1: permission " + w.title + "\n" + offered},
		{[]string{"decline", "req_"}, w.request + "\t" + w.thread + " run 1: permission " + w.title + "\n" + offered},
		{[]string{"run", "--provider", ""}, providers + offered},
		{[]string{"run", "--provider", "codex,c"}, "codex,claude\ncodex,cursor\n" + offered},
		{[]string{"merge", ""}, thread + offered},
		{[]string{"archive", ""}, thread + offered},
		{[]string{"compare", ""}, thread + offered},
		{[]string{"compare", w.thread, ""}, offered}, // given already
		{[]string{"diff", w.thread, ""}, offered},
		{[]string{"diff", "thr_nope", ""}, thread + offered},
		{[]string{"diff", "thr_nope", w.thread, ""}, nothing},
		{[]string{"send", "--provider", "c"}, "claude\ncodex\ncursor\n" + offered},
		{[]string{"switch", "--provider", ""}, providers + offered},
		{[]string{"threads", "--provider", ""}, providers + offered},
		{[]string{"run", "--on-limit", ""}, "wait\nstop\nswitch:acp\nswitch:claude\nswitch:codex\nswitch:cursor\nswitch:mine\nswitch:opencode\n" + offered},
		{[]string{"diff", w.thread, "--run", ""}, "1\twaiting: Write allowed.txt\n" + offered},
		{[]string{"rollback", w.thread, "--run", ""}, "0\tbefore the first run\n1\twaiting: Write allowed.txt\n" + offered},
		{[]string{"cancel", w.thread, "--run", ""}, offered}, // run 1 is not queued
		{[]string{"interrupt", w.thread, "--run", ""}, "1\twaiting: Write allowed.txt\n" + offered},
		{[]string{"diff", "thr_nope", "--run", ""}, offered},
	} {
		out, errOut, code := batonEnv(t, nil, "", append(append([]string{"__complete"}, args...), c.args...)...)
		wantErr := completionDone
		if c.want == nothing {
			wantErr = nothingDone
		}
		if code != exitOK || out != c.want || errOut != wantErr {
			t.Errorf("baton __complete %s: exit %d\nstdout (-want +got):\n%s\nstderr (-want +got):\n%s",
				strings.Join(c.args, " "), code, cmp.Diff(c.want, out), cmp.Diff(wantErr, errOut))
		}
	}
}

// Completion with no service reads the store read-only: it offers the
// threads, the request waiting, the providers installed and the runs, and
// leaves the data dir as it was, byte for byte (no host started, no pid
// file, no seal written, nothing reconciled of the run a killed host left
// waiting). Where there is nothing to read it offers nothing, silently,
// and creates nothing.
func TestCompletionFromTheStore(t *testing.T) {
	extra := lockedPluginDir(t)
	w := killedWaiting(t)
	before := dirState(t, w.data)
	checkCompletions(t, w, "--data", w.data, "--plugin-dir", extra)
	// The data dir from the environment (cobra's __complete applies no
	// flag's variable itself).
	if out, errOut, code := batonEnv(t, []string{"BATON_DATA=" + w.data}, "", "__complete", "show", ""); code != exitOK ||
		out != w.thread+"\tacp · waiting · "+w.cwd+"\n"+offered || errOut != completionDone {
		t.Errorf("baton __complete show with BATON_DATA: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	if diff := cmp.Diff(before, dirState(t, w.data)); diff != "" {
		t.Errorf("completion changed the data dir (-before +after):\n%s", diff)
	}

	// A data dir with no store yet: no threads, the providers all the same;
	// a --server that is not there: nothing; one that answers its health
	// check and then never answers: nothing, after completionTimeout.
	missing := filepath.Join(t.TempDir(), "none")
	mute := muteService(t)
	for _, c := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"--data", missing, "show", ""}, offered, completionDone},
		{[]string{"--data", missing, "approve", ""}, offered, completionDone},
		{[]string{"--data", missing, "--plugin-dir", extra, "run", "--provider", ""}, "acp\nclaude\ncodex\ncursor\nmine\nopencode\n" + offered, completionDone},
		{[]string{"--data", w.data, "--server", "unix://" + filepath.Join(missing, "baton.sock"), "show", ""}, nothing, nothingDone},
		{[]string{"--data", w.data, "--server", "unix://" + mute, "show", ""}, offered, completionDone},
	} {
		out, errOut, code := batonEnv(t, nil, "", append([]string{"__complete"}, c.args...)...)
		if code != exitOK || out != c.stdout || errOut != c.stderr {
			t.Errorf("baton __complete %s: exit %d\nstdout (-want +got):\n%s\nstderr (-want +got):\n%s", strings.Join(c.args, " "), code,
				cmp.Diff(c.stdout, out), cmp.Diff(c.stderr, errOut))
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("completion on a data dir that does not exist made it: %v", err)
	}
}

// Completion with a service running reads it: the same values, from the
// service (which holds the store: it could not be read otherwise).
func TestCompletionFromTheService(t *testing.T) {
	extra := lockedPluginDir(t)
	data, ws := t.TempDir(), t.TempDir()
	s := startService(t, data, "--plugin-dir", extra)
	c := s.client()
	argv := []string{filepath.Join(binDir, "replaypeer"), "--transcript", testdataPath("acp/approval_accept.ndjson"), "--speed", "0"}
	rc, err := c.CreateThread(t.Context(), &batonv1.CreateThreadRequest{Provider: "acp", Cwd: ws, ApprovalPolicy: "ask",
		ProviderCommand: &batonv1.ProviderCommand{Argv: argv}})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := subscribe(t.Context(), t, c, rc.GetThreadId(), 0)
	sent, err := c.SendMessage(t.Context(), &batonv1.SendMessageRequest{ThreadId: rc.GetThreadId(), Text: "Write allowed.txt"})
	if err != nil {
		t.Fatal(err)
	}
	opened := until(t, ev, "a request", ofType("request.opened"))
	var req struct {
		ID    string `json:"requestId"`
		Title string `json:"title"`
	}
	json.Unmarshal([]byte(opened[len(opened)-1].Data), &req)
	w := waiting{data: data, thread: rc.GetThreadId(), cwd: ws, run: sent.GetRunId(), request: req.ID, title: req.Title}
	checkCompletions(t, w, "--data", data)
	// The run goes on to its end once answered, before the service is
	// stopped.
	if _, err := c.AnswerRequest(t.Context(), &batonv1.AnswerRequestRequest{RequestId: req.ID, Decision: "accept"}); err != nil {
		t.Fatal(err)
	}
	until(t, ev, "the run's end", ofType("run.ended"))
	// Answered, the request is no longer offered.
	if out, errOut, code := baton(t, "__complete", "--data", data, "approve", ""); code != exitOK || out != offered || errOut != completionDone {
		t.Errorf("baton __complete approve after the answer: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}

// muteService serves the baton API on a unix socket, healthy, and
// answers no call: each waits until its caller gives up. It returns the
// socket.
func muteService(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "mute.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	batonv1.RegisterBatonServer(srv, muteBaton{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return sock
}

type muteBaton struct {
	batonv1.UnimplementedBatonServer
}

func (muteBaton) ListThreads(ctx context.Context, _ *batonv1.ListThreadsRequest) (*batonv1.ListThreadsResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// killedWaiting runs baton run --approve ask (its stdin open, never
// written) until the agent's request is open, then kills it with SIGKILL:
// its store holds a thread whose run 1 waits for an answer. It returns
// once the plugin and provider processes the host left are gone (the
// plugin writes the session's raw frames into the data dir).
func killedWaiting(t *testing.T) waiting {
	t.Helper()
	w := waiting{data: t.TempDir(), cwd: t.TempDir()}
	os.Chmod(w.data, 0o700)
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--json", "--data", w.data, "--cwd", w.cwd, "--provider", "acp",
		"--approve", "ask", "--provider-command", peerCommand(t, "acp/approval_accept.ndjson"), "Write allowed.txt")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	opened := make(chan waiting, 1)
	go func() {
		got := w
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l, _ := readPrinted(sc.Bytes())
			rec := l.Record
			var data struct {
				RunID     string `json:"runId"`
				RequestID string `json:"requestId"`
				Title     string `json:"title"`
			}
			json.Unmarshal(rec.Data, &data)
			switch rec.Type {
			case "run.queued":
				got.thread, got.run = rec.ThreadID, data.RunID
			case "request.opened":
				got.request, got.title = data.RequestID, data.Title
				opened <- got
				io.Copy(io.Discard, stdout)
				return
			}
		}
	}()
	select {
	case w = <-opened:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the agent's request never opened")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitForLeftovers(t, w)
	return w
}

// waitForLeftovers waits for the plugin and provider processes a killed
// host left to go, reading their pids from the store read-only.
func waitForLeftovers(t *testing.T, w waiting) {
	t.Helper()
	s, err := openStoreReadOnly(w.data)
	if err != nil {
		t.Fatal(err)
	}
	th, err := orchestrator.ReadThread(s, w.thread)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, ps := range th.ProviderSessions {
		for _, pid := range []int{ps.PluginPid, ps.ProviderPid} {
			if pid > 0 && !waitGone(pid, deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("process %d outlived the killed host", pid)
			}
		}
	}
}

// dirState is every file under dir: its mode, size and SHA-256.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if !d.Type().IsRegular() {
			state[rel] = fi.Mode().String()
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		state[rel] = fmt.Sprintf("%s %d %x", fi.Mode(), fi.Size(), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}
