package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A provider that will not stop: the runtime_exit that waits for a kill
// outlives its stdin closing and SIGTERM, in either order, and ends only
// by SIGKILL, as a provider that ignores its client must be ended. Each
// step's trace shows the peer lived through the step before.
func TestRuntimeExitWaitsForAKill(t *testing.T) {
	const at = "entry 2 (line 3, runtime_exit): "
	for _, sigFirst := range []bool{false, true} {
		name := map[bool]string{false: "stdin closed first", true: "SIGTERM first"}[sigFirst]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "t.ndjson")
			os.WriteFile(f, []byte(lines(header,
				`{"type":"emit_inbound","frame":{"type":"working"}}`,
				`{"type":"runtime_exit","status":"error","wait":"kill"}`)), 0o644)
			cmd := exec.Command(bin, "--transcript", f, "--workspace", dir, "--speed", "0", "--trace", "/dev/fd/3")
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			steps, started := trace(t, cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			started()
			rd := bufio.NewReader(stdout)
			if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, "working") {
				t.Fatalf("first frame: %q %v", line, err)
			}
			go io.Copy(io.Discard, rd)
			awaitTrace(t, steps, at+"waiting to be killed")
			if sigFirst {
				cmd.Process.Signal(syscall.SIGTERM)
				awaitTrace(t, steps, at+"signalled, still waiting to be killed")
				io.WriteString(stdin, `{"type":"anything"}`+"\n")
				awaitTrace(t, steps, at+"a frame dropped, still waiting to be killed")
				stdin.Close()
				awaitTrace(t, steps, at+"stdin closed, still waiting to be killed")
			} else {
				stdin.Close()
				awaitTrace(t, steps, at+"stdin closed, still waiting to be killed")
				cmd.Process.Signal(syscall.SIGTERM)
				awaitTrace(t, steps, at+"signalled, still waiting to be killed")
			}
			cmd.Process.Signal(syscall.SIGKILL)
			wait(t, cmd)
			if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("wait status %v; want killed by SIGKILL", ws)
			}
		})
	}
}
