// Package gitexec runs the git binary the way Baton's git plumbing needs
// it: with a fixed -c configuration that makes output independent of the
// user's settings and turns off hooks, gc and signing; with the GIT_*
// variables that would point git at another repository scrubbed from the
// environment; interrupted (then killed) when the context ends; and with
// errors that name the subcommand, its exit status and git's stderr.
package gitexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// config is passed as -c to every git command: output that does not
// depend on the user's quoting, no hooks, no gc, no signing, no fsmonitor
// daemon, and index files written whole (a split index would tie our cache
// to the user's shared index file).
var config = []string{
	"-c", "core.quotepath=off",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.splitIndex=false",
	"-c", "core.safecrlf=false",
	"-c", "commit.gpgSign=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "advice.addEmbeddedRepo=false",
}

// inheritedEnv lists variables that would point git at another
// repository, index or work tree than the one found from the command's
// directory (set, for example, when Baton runs from a git hook), or change
// what a diff looks like.
var inheritedEnv = map[string]bool{
	"GIT_DIR":                          true,
	"GIT_WORK_TREE":                    true,
	"GIT_INDEX_FILE":                   true,
	"GIT_OBJECT_DIRECTORY":             true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_COMMON_DIR":                   true,
	"GIT_NAMESPACE":                    true,
	"GIT_PREFIX":                       true,
	"GIT_IMPLICIT_WORK_TREE":           true,
	"GIT_EXTERNAL_DIFF":                true,
	"GIT_DIFF_OPTS":                    true,
}

// waitDelay is how long an interrupted git command has to exit before it
// is killed.
const waitDelay = 2 * time.Second

// ErrNotInstalled is returned by Run when git is not on PATH.
var ErrNotInstalled = errors.New("git is not installed")

// Cmd is one git invocation. Its zero value runs git in the current
// directory with the default environment.
type Cmd struct {
	Dir    string   // working directory
	Env    []string // added to the environment, after the defaults
	Read   bool     // a read-only command: no optional locks
	Stdin  []byte
	Stdout io.Writer // if nil, Run returns stdout
}

// Run runs git with args and returns its stdout (nil when c.Stdout is
// set). A failure is an *Error naming the git subcommand, the exit status
// and the first lines of stderr; ErrNotInstalled when there is no git; or
// the context's cause when ctx ended.
func (c Cmd) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append(config[:len(config):len(config)], args...)...)
	cmd.Dir = c.Dir
	cmd.Env = environ(c.Read, c.Env)
	// Interrupted, git removes its lock files (a killed update-ref would
	// leave the ref locked); if it does not exit soon, it is killed.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = waitDelay
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, newError(ctx, args, err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// environ is Scrubbed with a fixed locale, no prompts, no replace objects,
// and extra last (for duplicate keys, exec uses the last).
func environ(read bool, extra []string) []string {
	kept := Scrubbed()
	kept = append(kept, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1")
	if read {
		kept = append(kept, "GIT_OPTIONAL_LOCKS=0")
	}
	return append(kept, extra...)
}

// Scrubbed is the process's environment without the variables that would
// point git at another repository, index or work tree, for commands
// (such as a user's setup script) that may run git themselves.
func Scrubbed() []string {
	env := os.Environ()
	kept := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !inheritedEnv[k] {
			kept = append(kept, kv)
		}
	}
	return kept
}

// Error is a failed git command; its message is "git write-tree:
// exit status 128: fatal: ..." with the first lines of stderr.
type Error struct {
	Cmd    string // "git write-tree"
	Err    error  // from os/exec: an *exec.ExitError, or why git did not start
	Stderr string // all of git's stderr
}

func (e *Error) Error() string {
	if msg := FirstLines(e.Stderr, 3); msg != "" {
		return fmt.Sprintf("%s: %v: %s", e.Cmd, e.Err, msg)
	}
	return fmt.Sprintf("%s: %v", e.Cmd, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is git's exit status, or -1 if it did not exit normally.
func (e *Error) ExitCode() int {
	var exit *exec.ExitError
	if errors.As(e.Err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

// ExitCode is err's git exit status when err is an *Error that exited,
// else -1.
func ExitCode(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.ExitCode()
	}
	return -1
}

func newError(ctx context.Context, args []string, err error, stderr []byte) error {
	name := "git"
	if len(args) > 0 {
		name = "git " + args[0]
	}
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return ErrNotInstalled
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	return &Error{Cmd: name, Err: err, Stderr: string(stderr)}
}

// FirstLines returns up to n non-empty lines of s, trimmed and joined with
// "; ", cut at 512 bytes.
func FirstLines(s string, n int) string {
	var lines []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
			if len(lines) == n {
				break
			}
		}
	}
	msg := strings.Join(lines, "; ")
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	return msg
}
