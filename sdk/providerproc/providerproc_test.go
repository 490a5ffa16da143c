package providerproc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/sdk/clock"
)

// Close ends the provider's whole process group, children included, even
// when the provider ignores its stdin closing and SIGTERM. (An ended
// context skips the grace periods; grace_test.go times them.)
func TestCloseEndsTheGroup(t *testing.T) {
	f := clock.NewFake(epoch)
	p, stderr := startReady(t, f, `trap '' TERM; sleep 300 & echo child $! >&2; echo ready; wait`)
	var child int
	if l := next(t, stderr); !strings.HasPrefix(l.Text, "child ") {
		t.Fatalf("stderr = %q, want the child's pid", l.Text)
	} else if child, _ = strconv.Atoi(strings.TrimPrefix(l.Text, "child ")); child == 0 {
		t.Fatalf("no child pid in %q", l.Text)
	}
	// Its pidfd, opened while it runs, becomes readable when it exits.
	fd, err := unix.PidfdOpen(child, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Close(ctx)
	select {
	case <-p.Done():
	default:
		t.Fatal("Close returned before the provider exited")
	}
	if p.Err() == nil {
		t.Error("a killed provider should report its exit")
	}
	for { // the guard only keeps a surviving child from hanging the test
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Minute.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("the provider's child %d outlived Close (%v)", child, err)
		}
		break
	}
}

// A command that cannot start says why in one sentence naming it: the
// program is not there, not on $PATH, not executable, or its interpreter
// or working directory is not there.
func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	noInterp := filepath.Join(dir, "script")
	if err := os.WriteFile(plain, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noInterp, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cmd  Command
		want string
		is   error
	}{
		"empty":          {Command{}, "the provider command is empty", nil},
		"no such file":   {Command{Argv: []string{"/nonexistent/provider"}}, "the provider command /nonexistent/provider does not exist", fs.ErrNotExist},
		"not on PATH":    {Command{Argv: []string{"baton-no-such-provider"}}, "the provider command baton-no-such-provider is not on $PATH", exec.ErrNotFound},
		"not executable": {Command{Argv: []string{plain}}, "the provider command " + plain + " is not executable", fs.ErrPermission},
		"no interpreter": {Command{Argv: []string{noInterp}}, "the provider command " + noInterp + " cannot be run: the interpreter it names does not exist", fs.ErrNotExist},
		"no working dir": {Command{Argv: []string{"sh"}, Dir: "/nonexistent/dir"}, "the provider's working directory /nonexistent/dir does not exist", fs.ErrNotExist},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Start(tc.cmd)
			if err == nil {
				t.Fatal("started")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("start error (-want +got):\n%s", diff)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("start error %v is not %v", err, tc.is)
			}
		})
	}
}

// What a provider wrote before it exited is still there to read after it
// exited (a pipe closed by Wait would lose it).
func TestOutputOutlivesTheProcess(t *testing.T) {
	p, err := Start(Command{Argv: []string{"sh", "-c", "seq 1 5000"}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	b, err := io.ReadAll(p.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 5000 {
		t.Fatalf("read %d lines after the exit, want 5000", n)
	}
}

// FreePort gives a port on 127.0.0.1 that can be listened on.
func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if port <= 0 || port > 65535 {
		t.Fatalf("FreePort() = %d, want a TCP port", port)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	l.Close()
}
