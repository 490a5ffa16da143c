//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
)

// A host killed with SIGKILL mid-run loses nothing it committed: the next
// host finds the thread, the run and the session, ends the run with a
// reason, and the plugin and provider processes it left do not live on.
func TestSIGKILLLosesNothingCommitted(t *testing.T) {
	data, ws := t.TempDir(), t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "baton"), "run", "--json", "--data", data, "--cwd", ws, "--provider", "acp",
		"--provider-command", peerCommand(t, "acp/stall.ndjson"), "Take your time")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// Printed once committed: the provider's reasoning has started.
			if l := sc.Text(); strings.Contains(l, `"type":"node.started"`) && strings.Contains(l, `"kind":"reasoning"`) {
				close(opened)
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case <-opened:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the provider never started reasoning")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	h, err := orchestrator.Open(orchestrator.Config{DataDir: data, PluginDirs: []string{binDir}})
	if err != nil {
		t.Fatalf("a new host on the data dir: %v", err)
	}
	defer h.Close()
	var th domain.Thread
	for rec, err := range h.Events(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if th, err = h.Thread(rec.ThreadID); err == nil && len(th.Runs) > 0 && th.Runs[0].Status.Terminal() {
			break
		}
	}
	if len(th.Runs) != 1 || len(th.ProviderSessions) != 1 || len(th.TurnItems) == 0 {
		t.Fatalf("committed state lost: %d runs, %d sessions, %d items", len(th.Runs), len(th.ProviderSessions), len(th.TurnItems))
	}
	r := th.Runs[0]
	if r.Status != domain.RunStatusFailed || r.Failure == nil || r.Failure.Code != "host_restarted" {
		t.Errorf("run after the kill = %s %+v; want failed with host_restarted", r.Status, r.Failure)
	}
	// The orphaned plugin and provider go away on their own.
	s := th.ProviderSessions[0]
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range []int{s.PluginPid, s.ProviderPid} {
		if !waitGone(pid, deadline) {
			t.Errorf("process %d outlived the killed host", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitGone waits until a process (not this one's child) has exited, or
// the deadline: its pidfd becomes readable when it exits.
func waitGone(pid int, deadline time.Time) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return !alive(pid) // gone already (ESRCH)
	}
	defer unix.Close(fd)
	for alive(pid) {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return false
		}
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms); err != nil && err != unix.EINTR {
			return !alive(pid)
		}
	}
	return true
}

// alive says whether a process runs (a zombie waiting for its new parent to
// reap it does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
