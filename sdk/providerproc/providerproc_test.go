package providerproc

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

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

func TestStartErrors(t *testing.T) {
	if _, err := Start(Command{}); err == nil {
		t.Error("an empty command started")
	}
	if _, err := Start(Command{Argv: []string{"/nonexistent/provider"}}); err == nil || !strings.Contains(err.Error(), "/nonexistent/provider") {
		t.Errorf("err = %v, want one naming the command", err)
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
