package providerproc

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Close ends the provider's whole process group, children included, even
// when the provider ignores its stdin closing and SIGTERM.
func TestCloseEndsTheGroup(t *testing.T) {
	var mu sync.Mutex
	var stderr []string
	p, err := Start(Command{Argv: []string{"sh", "-c", `trap '' TERM; sleep 300 & echo child $! >&2; echo ready; wait`},
		Stderr: func(l []byte) { mu.Lock(); stderr = append(stderr, string(l)); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(p.Stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("stdout = %q", line)
	}
	var child int
	for i := 0; child == 0 && i < 200; i++ { // stderr arrives on its own
		mu.Lock()
		for _, l := range stderr {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "child" {
				child, _ = strconv.Atoi(f[1])
			}
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	if child == 0 {
		t.Fatalf("no child pid in stderr %q", stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond) // skip the grace periods
	defer cancel()
	p.Close(ctx)
	select {
	case <-p.Done():
	default:
		t.Fatal("Close returned before the provider exited")
	}
	if p.Err() == nil {
		t.Error("a killed provider should report its exit")
	}
	for i := 0; alive(child) && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(child) {
		t.Errorf("the provider's child %d outlived Close", child)
	}
}

// alive says whether a process runs; a zombie waiting to be reaped by its
// new parent does not.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	return !strings.Contains(string(b), ") Z")
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
