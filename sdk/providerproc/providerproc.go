// Package providerproc starts a provider process and stops it with all its
// children. The process runs in its own process group, so a Ctrl-C at the
// host's terminal does not reach it and Close can end the whole group.
package providerproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
)

// GracePeriod is how long Close waits for the provider to exit after its
// stdin closes, and again after SIGTERM, before SIGKILL.
const GracePeriod = 3 * time.Second

// Command is what to run.
type Command struct {
	Argv []string
	// Env holds KEY=VALUE entries added to the current environment.
	Env []string
	Dir string
	// Stderr receives the provider's stderr a line at a time (optional).
	Stderr func(line []byte)
	// Clock times Close's grace periods (nil: the system clock).
	Clock clock.Clock
}

// Process is a running provider process.
type Process struct {
	cmd    *exec.Cmd
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	clock  clock.Clock

	done    chan struct{}
	waitErr error
	once    sync.Once
}

// maxStderrLine bounds one stderr line; longer ones are split.
const maxStderrLine = 64 << 10

// lineWriter hands stderr to a callback a line at a time.
type lineWriter struct {
	mu  sync.Mutex
	fn  func([]byte)
	buf []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxStderrLine {
				w.emit(w.buf[:maxStderrLine])
				w.buf = append(w.buf[:0], w.buf[maxStderrLine:]...)
				continue
			}
			return len(b), nil
		}
		w.emit(w.buf[:i])
		w.buf = append(w.buf[:0], w.buf[i+1:]...)
	}
}

func (w *lineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if w.fn != nil && len(line) > 0 {
		w.fn(append([]byte(nil), line...))
	}
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emit(w.buf)
	w.buf = nil
}

// Start starts the command. The process is not bound to ctx: it lives until
// Close or until it exits.
func Start(c Command) (*Process, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, errors.New("the provider command is empty")
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeath(cmd.SysProcAttr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start provider %s: %w", c.Argv[0], err)
	}
	// stdout is a pipe of our own, not cmd.StdoutPipe: Wait closes that
	// one as soon as the process exits, and lines still in the pipe would
	// be lost. Ours closes when its reader reaches the end.
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start provider %s: %w", c.Argv[0], err)
	}
	cmd.Stdout = stdoutW
	stdout := &pipeReader{f: stdoutR}
	lw := &lineWriter{fn: c.Stderr}
	cmd.Stderr = lw
	// A grandchild that keeps stderr open must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	stdoutW.Close() // the child has its own copy
	if err != nil {
		stdout.Close()
		return nil, startError(c, err)
	}
	p := &Process{cmd: cmd, Stdin: stdin, Stdout: stdout, clock: clock.Or(c.Clock), done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		lw.flush()
		close(p.done)
	}()
	return p, nil
}

// startError says in one sentence why the command did not start: the
// program or the directory is not there, or cannot be run. It wraps err
// (for errors.Is) without repeating it where it says no more.
func startError(c Command, err error) error {
	prog := c.Argv[0]
	say := func(format string) error { return &startErr{msg: fmt.Sprintf(format, prog), err: err} }
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return say("the provider command %s is not on $PATH")
	case c.Dir != "" && !isDir(c.Dir):
		return &startErr{msg: fmt.Sprintf("the provider's working directory %s does not exist", c.Dir), err: err}
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(prog); serr == nil {
			// The program is there: the interpreter it names is not.
			return say("the provider command %s cannot be run: the interpreter it names does not exist")
		}
		return say("the provider command %s does not exist")
	case errors.Is(err, fs.ErrPermission):
		return say("the provider command %s is not executable")
	}
	return fmt.Errorf("the provider command %s cannot be run: %w", prog, err)
}

// startErr is a start error told in its own words.
type startErr struct {
	msg string
	err error
}

func (e *startErr) Error() string { return e.msg }
func (e *startErr) Unwrap() error { return e.err }

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// pipeReader is the read end of the provider's stdout. It closes itself at
// the end of the stream; Close also ends a read that waits on a grandchild
// that kept the pipe open.
type pipeReader struct {
	f    *os.File
	once sync.Once
}

func (r *pipeReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if err == io.EOF {
		r.Close()
	}
	return n, err
}

func (r *pipeReader) Close() error {
	r.once.Do(func() { r.f.Close() })
	return nil
}

// Pid is the provider's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit error (nil for exit status 0), valid after Done.
func (p *Process) Err() error {
	<-p.done
	return p.waitErr
}

// Signal sends sig to the provider's whole process group at once (an
// interrupt for providers that stop on a signal). A group that is gone is
// not an error.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal provider group %d: %w", p.cmd.Process.Pid, err)
	}
	return nil
}

// Close ends the process group: it closes stdin, and if the process has
// not exited GracePeriod later, sends SIGTERM to the group, then SIGKILL
// after GracePeriod (each wait cut short when ctx ends). A forced close
// (sdk.ForceClose: a provider that did not stop when asked) skips the
// first wait: SIGTERM at once, SIGKILL after GracePeriod.
func (p *Process) Close(ctx context.Context) error {
	p.once.Do(func() {
		_ = p.Stdin.Close()
		pgid := p.cmd.Process.Pid
		if sdk.ForceClosing(ctx) || !p.waitFor(ctx, GracePeriod) {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			p.waitFor(ctx, GracePeriod)
		}
		// Whatever the provider left behind in its group goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	})
	return nil
}

// waitFor waits up to d for the process to exit.
func (p *Process) waitFor(ctx context.Context, d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C():
	case <-ctx.Done():
	}
	return false
}
