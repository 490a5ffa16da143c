//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// TestNoProcessLeftAfterClose: a process cursor-agent started in its
// process group (a command left in the background) does not outlive the
// session; the one here also keeps the CLI's stdout open.
func TestNoProcessLeftAfterClose(t *testing.T) {
	p := start(t)
	ws, dir := t.TempDir(), t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	cmd := plugintest.PeerCommand(testdata+"simple.ndjson", ws, filepath.Join(dir, "cursor"))
	cmd.Argv = append([]string{"sh", "-c", `sleep 300 & echo $! > ` + pidFile + `; exec "$0" "$@"`}, cmd.Argv...)
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Command: cmd})
	s.StartTurn(t, "Write hello.txt saying hello, then tell me you did.")
	if term := terminal(t, s.WaitTurn(t)); term.Status != sdk.TurnCompleted {
		t.Fatalf("turn ended %+v; want completed", term)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	fd := plugintest.Pidfd(t, pid) // opened while it runs
	s.Close(t)
	// The bound only keeps a broken plugin from hanging the test.
	if !plugintest.Exited(t, fd, plugintest.Timeout) {
		t.Fatalf("process %d the CLI left behind still runs after the session closed", pid)
	}
}
