package checkpoint

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

// gitConfig is passed as -c to every git command: output that does not
// depend on the user's quoting, no hooks, no gc, no signing, no fsmonitor
// daemon, and index files written whole (a split index would tie our cache
// to the user's shared index file).
var gitConfig = []string{
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

// inheritedGitEnv lists variables that would point git at another
// repository, index or work tree than the one found from the command's
// directory (set, for example, when Baton runs from a git hook), or change
// what a diff looks like.
var inheritedGitEnv = map[string]bool{
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

// gitWaitDelay is how long an interrupted git command has to exit before
// it is killed.
const gitWaitDelay = 2 * time.Second

// errNoGit is returned by run when git is not on PATH.
var errNoGit = errors.New("git is not installed")

// gitRun is one git invocation.
type gitRun struct {
	dir   string   // working directory
	env   []string // added to the environment, after the defaults
	read  bool     // a read-only command: no optional locks
	stdin []byte
	out   io.Writer // stdout; if nil, run returns it
}

// run runs git with args and returns its stdout. A failure names the git
// subcommand, the exit status and the first lines of stderr.
func (g gitRun) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append(gitConfig[:len(gitConfig):len(gitConfig)], args...)...)
	cmd.Dir = g.dir
	cmd.Env = gitEnv(g.read, g.env)
	// Interrupted, git removes its lock files (a killed update-ref would
	// leave the ref locked); if it does not exit soon, it is killed.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = gitWaitDelay
	if g.stdin != nil {
		cmd.Stdin = bytes.NewReader(g.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	if g.out != nil {
		cmd.Stdout = g.out
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, newGitError(ctx, args, err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

func gitEnv(read bool, extra []string) []string {
	env := os.Environ()
	kept := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !inheritedGitEnv[k] {
			kept = append(kept, kv)
		}
	}
	kept = append(kept, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1")
	if read {
		kept = append(kept, "GIT_OPTIONAL_LOCKS=0")
	}
	return append(kept, extra...) // for duplicate keys, exec uses the last
}

// gitError is a failed git command; its message is "git write-tree:
// exit status 128: fatal: ..." with the first lines of stderr.
type gitError struct {
	cmd    string // "git write-tree"
	err    error
	stderr string
}

func (e *gitError) Error() string {
	if msg := firstLines(e.stderr, 3); msg != "" {
		return fmt.Sprintf("%s: %v: %s", e.cmd, e.err, msg)
	}
	return fmt.Sprintf("%s: %v", e.cmd, e.err)
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is git's exit status, or -1 if it did not exit normally.
func (e *gitError) exitCode() int {
	var exit *exec.ExitError
	if errors.As(e.err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

func newGitError(ctx context.Context, args []string, err error, stderr []byte) error {
	name := "git"
	if len(args) > 0 {
		name = "git " + args[0]
	}
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return errNoGit
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", name, context.Cause(ctx))
	}
	return &gitError{cmd: name, err: err, stderr: string(stderr)}
}

// firstLines returns up to n non-empty lines of s, joined with "; ".
func firstLines(s string, n int) string {
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
