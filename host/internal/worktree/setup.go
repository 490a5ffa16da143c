package worktree

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// MaxSetupOutput is how much of a setup command's output Created keeps:
// its end, where a failure says what went wrong.
const MaxSetupOutput = 64 << 10

// setupWaitDelay is how long a setup command's output pipes may stay open
// after it was killed (by a child it left running) before they are closed.
const setupWaitDelay = 2 * time.Second

// setup runs command with sh -c in dir and returns its exit status (-1
// when it did not start or was killed) and the end of its output.
func setup(ctx context.Context, dir, command string) (exit int, output string) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = gitexec.Scrubbed()
	cmd.WaitDelay = setupWaitDelay
	var out tail
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exitErr):
		return exitErr.ExitCode(), out.String() // -1 when killed by a signal
	default:
		return -1, out.String() + fmt.Sprintf("setup did not run: %v\n", err)
	}
}

// tail keeps the last MaxSetupOutput bytes written to it. Writes may come
// from two goroutines (stdout and stderr).
type tail struct {
	mu   sync.Mutex
	buf  []byte
	lost int // bytes dropped from the front
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - MaxSetupOutput; over > 0 {
		t.lost += over
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is the output kept, after a line saying how much was cut.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lost == 0 {
		return string(t.buf)
	}
	return fmt.Sprintf("[setup output cut: the first %d bytes are not shown]\n", t.lost) + string(t.buf)
}
