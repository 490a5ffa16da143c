package worktree

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// Stat counts what changed between two commits.
type Stat struct {
	Files   int      // files changed
	Added   int      // lines added (binary files count none)
	Removed int      // lines removed
	Paths   []string // the files changed, sorted
}

// DiffStat counts the changes from from to to (commits or trees) in
// root's repository. A rename counts as a removal and an addition.
func DiffStat(ctx context.Context, root, from, to string) (Stat, error) {
	out, err := gitReadRaw(ctx, root, "diff-tree", "-r", "--numstat", "-z", "--no-renames", from, to, "--")
	if err != nil {
		return Stat{}, fmt.Errorf("count changes from %s to %s: %w", short(from), short(to), err)
	}
	s, err := parseNumstat(out)
	if err != nil {
		return Stat{}, fmt.Errorf("count changes from %s to %s: %w", short(from), short(to), err)
	}
	return s, nil
}

// DiffText returns the unified diff from a to b in root's repository, and
// whether it was cut at max bytes (max <= 0: no limit).
func DiffText(ctx context.Context, root, a, b string, max int) (string, bool, error) {
	w := &capWriter{max: max}
	_, err := gitexec.Cmd{Dir: root, Read: true, Stdout: w}.Run(ctx,
		"diff-tree", "-r", "-p", "--no-color", "--no-ext-diff", "--no-textconv", "--find-renames", a, b, "--")
	if err != nil && !w.cut { // a cut diff may end git with a broken pipe
		return "", false, fmt.Errorf("diff %s %s: %w", short(a), short(b), err)
	}
	return string(w.buf), w.cut, nil
}

// errCut stops git writing a diff once capWriter has all it keeps.
var errCut = errors.New("diff cut")

// capWriter keeps the first max bytes written to it (all when max <= 0).
type capWriter struct {
	max int
	buf []byte
	cut bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.max > 0 && len(w.buf)+len(p) > w.max {
		w.buf = append(w.buf, p[:w.max-len(w.buf)]...)
		w.cut = true
		return 0, errCut
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}
