package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/baton-run/baton/host/internal/service"
)

// startServe runs `baton serve` on a data dir until the test ends (or
// stop), once its socket answers.
func startServe(t *testing.T, data string, args ...string) (stop func() error) {
	t.Helper()
	if err := os.Chmod(data, 0o700); err != nil { // serve refuses a data dir others may reach
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "baton"), append([]string{"serve", "--data", data}, args...)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			return <-done
		}
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("baton serve: %v\n%s", err, errb.String())
		}
	})
	conn, err := service.Dial(t.Context(), filepath.Join(data, "baton.sock"), service.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("baton serve never answered: %v\n%s", err, errb.String())
	}
	return stop
}

// lineWaiter reads a process's output lines, and waits for one.
type lineWaiter struct {
	lines chan string
	seen  []string
}

func newLineWaiter(r io.Reader) *lineWaiter {
	w := &lineWaiter{lines: make(chan string)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	return w
}

// until returns the first line (from now) that matches, or fails the test
// when the output ends or a minute passes first.
func (w *lineWaiter) until(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("the output ended before a line matching %s:\n%s", re, strings.Join(w.seen, "\n"))
			}
			w.seen = append(w.seen, l)
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("no line matching %s in a minute:\n%s", re, strings.Join(w.seen, "\n"))
		}
	}
}

func (w *lineWaiter) rest() string {
	for l := range w.lines {
		w.seen = append(w.seen, l)
	}
	return strings.Join(w.seen, "\n")
}

// Against a service found on the data dir's socket, a request that baton
// run is asking about is answered from another terminal with baton
// approve, and the run goes on.
func TestServeApproveFromAnotherTerminal(t *testing.T) {
	data, ws, extra := t.TempDir(), t.TempDir(), t.TempDir()
	if out, errOut, code := baton(t, "plugin", "install", "other", filepath.Join(binDir, "baton-plugin-acp"), extra); code != exitOK {
		t.Fatalf("plugin install: exit %d\n%s\n%s", code, out, errOut)
	}
	startServe(t, data, "--plugin-dir", extra)
	run := exec.Command(filepath.Join(binDir, "baton"), "run", "--data", data, "--provider", "acp", "--approve", "ask", "--cwd", ws,
		"--provider-command", peerCommand(t, "acp/approval_accept.ndjson"), "Write allowed.txt")
	stdin, _ := run.StdinPipe() // open, never written: the answer comes from elsewhere
	defer stdin.Close()
	stdout, _ := run.StdoutPipe()
	var errb bytes.Buffer
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	out := newLineWaiter(stdout)
	req := out.until(t, regexp.MustCompile(`\? permission request (\S+):`))[1]

	got, errOut, code := baton(t, "approve", "--data", data, req)
	if code != exitOK || !strings.Contains(got, "request "+req+": accept") {
		t.Fatalf("approve: exit %d\n%s\n%s", code, got, errOut)
	}
	out.until(t, regexp.MustCompile(`\? request `+req+`: accept \(by client\)`))
	out.until(t, regexp.MustCompile(`^✔ run 1 completed`))
	all := out.rest()
	if err := run.Wait(); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, all, errb.String())
	}
	thread := threadOf(t, all)
	// The service's plugins, through ListPlugins: this machine's, and the
	// one in the service's own --plugin-dir, as they say of themselves.
	local, _, _ := baton(t, "plugin", "list", "--markdown", "--data", t.TempDir())
	got, errOut, code = baton(t, "plugin", "list", "--markdown", "--data", data)
	acpRow := regexp.MustCompile(`(?m)^\| acp (\|.*)$`).FindStringSubmatch(local)
	end := strings.Index(local, "\n\nWhere") // after the table's last row (the plugin dirs in order)
	want := local[:end] + "\n| other " + acpRow[1] + local[end:]
	if diff := cmp.Diff(want, got); code != exitOK || diff != "" {
		t.Errorf("plugin list through the service: exit %d, %s (-want +got):\n%s", code, errOut, diff)
	}
	got, _, code = baton(t, "threads", "--server", "unix://"+filepath.Join(data, "baton.sock"))
	if code != exitOK || !strings.Contains(got, thread+"  acp       idle, last run completed  1") {
		t.Errorf("threads --server: exit %d\n%s", code, got)
	}
}

// baton run --detach leaves the run going at Ctrl-C; baton interrupt
// stops it, and baton watch shows it end.
func TestServeDetachInterruptWatch(t *testing.T) {
	data := t.TempDir()
	startServe(t, data)
	run := exec.Command(filepath.Join(binDir, "baton"), "run", "--data", data, "--provider", "acp", "--detach", "--cwd", t.TempDir(),
		"--provider-command", peerCommand(t, "acp/turn_interrupt.ndjson"), "Write a very long essay about rivers.")
	stdout, _ := run.StdoutPipe()
	var errb bytes.Buffer
	run.Stderr = &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	out := newLineWaiter(stdout)
	thread := out.until(t, regexp.MustCompile(`^● thread (\S+) `))[1]
	out.until(t, regexp.MustCompile(`provider session`))
	run.Process.Signal(syscall.SIGINT)
	all := out.rest()
	if err := run.Wait(); err != nil || !strings.Contains(errb.String(), "baton watch "+thread) {
		t.Fatalf("run --detach after Ctrl-C: %v\n%s\n%s", err, all, errb.String())
	}
	// The run goes on: it is running once the provider has taken its turn
	// (the session may have opened just before the detach), which the
	// thread's events say.
	bound := exec.Command(filepath.Join(binDir, "baton"), "watch", "--json", "--data", data, "--after", "0", thread)
	bout, _ := bound.StdoutPipe()
	if err := bound.Start(); err != nil {
		t.Fatal(err)
	}
	newLineWaiter(bout).until(t, regexp.MustCompile(`"type":"provider\.turn\.bound"`))
	bound.Process.Signal(syscall.SIGINT)
	bound.Wait()
	if got, _, code := baton(t, "show", "--data", data, thread); code != exitOK || !regexp.MustCompile(`(?m)^  1  \S+  running`).MatchString(got) {
		t.Fatalf("the run after the detach: exit %d\n%s", code, got)
	}
	// The thread is read after the interrupt is committed: a provider that
	// confirms at once has ended the run by then, and the line says so.
	if got, errOut, code := baton(t, "interrupt", "--data", data, thread); code != exitOK ||
		!regexp.MustCompile(`^run 1 of thread `+thread+`: (interrupt sent; it ends when the provider confirms|interrupted)`).MatchString(got) {
		t.Fatalf("interrupt: exit %d\n%s\n%s", code, got, errOut)
	}
	watch := exec.Command(filepath.Join(binDir, "baton"), "watch", "--data", data, "--after", "0", thread)
	wout, _ := watch.StdoutPipe()
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	w := newLineWaiter(wout)
	w.until(t, regexp.MustCompile(`^⏹ run 1 interrupted`))
	watch.Process.Signal(syscall.SIGINT)
	w.rest()
	if err := watch.Wait(); err != nil {
		t.Errorf("watch after Ctrl-C: %v", err)
	}
}
