// Package checkpoint snapshots a thread's working directory into git
// commits, restores a directory to a snapshot and diffs snapshots.
//
// It uses git plumbing only, on indexes of its own: the user's branch, HEAD,
// index and stash are never touched. A checkpoint is a parentless commit of
// every file `git add -A` would take in the directory (tracked and untracked,
// not ignored), kept alive by a ref the caller names.
package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-run/baton/sdk/clock"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// Checkpoint statuses.
const (
	StatusReady   = "ready"
	StatusMissing = "missing"
)

// Kinds of FileChange.
const (
	KindAdded       = "added"
	KindModified    = "modified"
	KindDeleted     = "deleted"
	KindTypeChanged = "type_changed"
)

// DefaultDiffMax is the size Diff cuts a diff at when given no limit: about
// what a reader can take in, and small enough to send in one message.
const DefaultDiffMax = 1 << 20

// author is the checkpoint commits' author and committer.
const (
	authorName  = "Baton"
	authorEmail = "baton@localhost"
)

// Service captures, restores and diffs checkpoints. It holds one lock per
// worktree: an in-process one per git dir, plus an flock on
// <gitdir>/baton/checkpoint.lock so two processes on one repo do not
// interleave. It is safe for concurrent use.
type Service struct {
	clock clock.Clock // paces the wait for another process's lock
	mu    sync.Mutex
	locks map[string]chan struct{} // by git dir; a full channel is a held lock
	repos map[string]repo          // by directory: where each is in git
}

// Option configures a Service.
type Option func(*Service)

// WithClock runs the Service's waits on c (nil: the system clock).
func WithClock(c clock.Clock) Option {
	return func(s *Service) { s.clock = clock.Or(c) }
}

// New returns a Service.
func New(opts ...Option) *Service {
	s := &Service{clock: clock.System, locks: map[string]chan struct{}{}, repos: map[string]repo{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// FileChange is one file's change between two checkpoints.
type FileChange struct {
	Path      string `json:"path"` // slash-separated, relative to the checkpointed dir
	Kind      string `json:"kind"` // KindAdded, KindModified, KindDeleted or KindTypeChanged
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
}

// Result is the outcome of a capture.
type Result struct {
	Status string       // StatusReady or StatusMissing
	Commit string       // the checkpoint commit (ready only)
	Files  []FileChange // against base, sorted by path
	Reason string       // why missing (e.g. "/x is not in a git repository"), or ""
}

// Restored lists the paths a restore wrote and removed, relative to the
// directory, slash-separated and sorted.
type Restored struct {
	Written, Removed []string
	// Saved is the commit that keeps the files as they were (SaveAndRestore).
	Saved string
}

// Diff is a unified diff between checkpoints.
type Diff struct {
	Text      string
	Truncated bool  // Text was cut; it ends with a marker line saying so
	Size      int64 // the whole diff's size in bytes
}

// NoSummary as Capture's base asks for no file summary: a first
// checkpoint has nothing to compare with, and listing every file of a large
// tree against the empty one would read them all.
const NoSummary = "-"

// Capture snapshots dir into a parentless commit, points ref at it and
// summarizes it against base, an earlier checkpoint commit ("" is the empty
// tree; NoSummary skips the summary). The commit's author, committer and message are fixed and its date
// is now, so the same files at the same time give the same commit.
//
// If dir is not a directory in a git work tree, or git is not installed,
// Capture returns a result with StatusMissing and the reason, and no error.
func (s *Service) Capture(ctx context.Context, dir, ref, base string, now time.Time) (Result, error) {
	res, err := s.capture(ctx, dir, ref, base, now)
	if err != nil {
		return Result{}, fmt.Errorf("checkpoint: capture %s: %w", dir, err)
	}
	return res, nil
}

func (s *Service) capture(ctx context.Context, dir, ref, base string, now time.Time) (Result, error) {
	if ref == "" {
		return Result{}, errors.New("no ref to point at the checkpoint")
	}
	r, missing, err := s.open(ctx, dir)
	if err != nil {
		return Result{}, err
	}
	if missing != "" {
		return Result{Status: StatusMissing, Reason: missing}, nil
	}
	unlock, err := s.lock(ctx, r)
	if err != nil {
		return Result{}, err
	}
	defer unlock()

	tree, err := writeTree(ctx, r)
	if err != nil {
		return Result{}, err
	}
	// The summary needs only the tree, so it is made while the commit is
	// written and the ref moved.
	waitCommit := async(func() (string, error) { return commitTree(ctx, r, tree, ref, now) })
	if base == NoSummary {
		commit, err := waitCommit()
		if err != nil {
			return Result{}, err
		}
		return Result{Status: StatusReady, Commit: commit}, nil
	}
	if base == "" {
		base = r.emptyTree
	}
	summary, summaryErr := gitexec.Cmd{Dir: r.dir, Read: true}.Run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", base, tree)
	commit, err := waitCommit()
	if err != nil {
		return Result{}, err
	}
	if summaryErr != nil {
		return Result{}, summaryErr
	}
	files, err := parseSummary(summary)
	if err != nil { // unreachable while git writes diff-tree's documented format
		return Result{}, err
	}
	return Result{Status: StatusReady, Commit: commit, Files: files}, nil
}

// commitTree makes tree a parentless checkpoint commit dated now and points
// ref at it.
func commitTree(ctx context.Context, r repo, tree, ref string, now time.Time) (string, error) {
	date := fmt.Sprintf("@%d %s", now.Unix(), now.Format("-0700"))
	out, err := gitexec.Cmd{Dir: r.dir, Env: []string{
		"GIT_AUTHOR_NAME=" + authorName, "GIT_AUTHOR_EMAIL=" + authorEmail, "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + authorName, "GIT_COMMITTER_EMAIL=" + authorEmail, "GIT_COMMITTER_DATE=" + date,
	}}.Run(ctx, "commit-tree", "--no-gpg-sign", "-m", "baton checkpoint", tree)
	if err != nil {
		return "", err
	}
	commit := string(bytes.TrimSpace(out))
	_, err = gitexec.Cmd{Dir: r.dir}.Run(ctx, "update-ref", "-m", "baton checkpoint", ref, commit)
	return commit, err
}

// Restore makes dir's files those of commit's tree, commit being a
// checkpoint of dir. Only paths that differ are touched: written with the
// target's content and mode (symlinks too), or removed if the target does
// not have them, with the directories that leaves empty (never dir itself).
// Ignored files are left alone, as they are not in checkpoints, unless a
// checkpointed file must take their place; so are submodules. The user's
// index and HEAD are not touched.
func (s *Service) Restore(ctx context.Context, dir, commit string) (Restored, error) {
	return s.SaveAndRestore(ctx, dir, commit, "", time.Time{})
}

// SaveAndRestore is Restore that first keeps dir's files as they are in a
// checkpoint commit dated now under saveRef (Restored.Saved): the same
// snapshot the restore compares with, in the same hold of the lock, so a
// rollback can be undone by hand. An empty saveRef keeps nothing.
func (s *Service) SaveAndRestore(ctx context.Context, dir, commit, saveRef string, now time.Time) (Restored, error) {
	res, err := s.restore(ctx, dir, commit, saveRef, now)
	if err != nil {
		return Restored{}, fmt.Errorf("checkpoint: restore %s: %w", dir, err)
	}
	return res, nil
}

func (s *Service) restore(ctx context.Context, dir, commit, saveRef string, now time.Time) (Restored, error) {
	r, missing, err := s.open(ctx, dir)
	if err != nil {
		return Restored{}, err
	}
	if missing != "" {
		return Restored{}, errors.New(missing)
	}
	unlock, err := s.lock(ctx, r)
	if err != nil {
		return Restored{}, err
	}
	defer unlock()

	current, err := writeTree(ctx, r)
	if err != nil {
		return Restored{}, err
	}
	var res Restored
	if saveRef != "" {
		if res.Saved, err = commitTree(ctx, r, current, saveRef, now); err != nil {
			return Restored{}, err
		}
	}
	out, err := gitexec.Cmd{Dir: r.dir, Read: true}.Run(ctx, "diff-tree", "-r", "-z", "--no-renames", "--raw", current, commit)
	if err != nil {
		return Restored{}, err
	}
	changes, _, err := parseDiffTree(out)
	if err != nil { // unreachable while git writes diff-tree's documented format
		return Restored{}, err
	}
	var write []rawChange
	for _, c := range changes {
		switch {
		case c.oldMode == modeGitlink || c.newMode == modeGitlink:
			// A submodule is its own repository; its files are not ours.
		case c.status == 'D':
			res.Removed = append(res.Removed, c.path)
		default:
			res.Written = append(res.Written, c.path)
			write = append(write, c)
		}
	}
	// Removals first: a removed file may be in the way of a written
	// directory, and a written file in the way of a removed directory.
	for _, p := range res.Removed {
		if err := removeFile(r.dir, p); err != nil {
			return Restored{}, err
		}
	}
	if err := checkout(ctx, r, write); err != nil {
		return Restored{}, err
	}
	slices.Sort(res.Written)
	slices.Sort(res.Removed)
	return res, nil
}

// removeFile removes dir/p, then its parent directories up to dir that it
// leaves empty.
func removeFile(dir, p string) error {
	name := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for d := filepath.Dir(name); d != dir && strings.HasPrefix(d, dir+string(filepath.Separator)); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty, or gone
			break
		}
	}
	return nil
}

// checkout writes the target side of changes into the work tree, from an
// index holding just those entries.
func checkout(ctx context.Context, r repo, changes []rawChange) error {
	if len(changes) == 0 {
		return nil
	}
	tmp, err := os.MkdirTemp(r.stateDir(), "restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var info bytes.Buffer
	for _, c := range changes {
		fmt.Fprintf(&info, "%s %s\t%s%s\x00", c.newMode, c.newID, r.prefix, c.path)
	}
	g := gitexec.Cmd{Dir: r.top, Env: []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}, Stdin: info.Bytes()}
	if _, err := g.Run(ctx, "update-index", "-z", "--index-info"); err != nil {
		return err
	}
	g.Stdin = nil
	_, err = g.Run(ctx, "checkout-index", "-a", "-f")
	return err
}

// Diff returns the unified diff from base ("" is the empty tree) to commit,
// cut at max bytes (max <= 0: DefaultDiffMax). A cut diff ends at a line
// boundary when there is one, followed by a marker line.
func (s *Service) Diff(ctx context.Context, dir, base, commit string, max int) (Diff, error) {
	d, err := diff(ctx, dir, base, commit, max)
	if err != nil {
		return Diff{}, fmt.Errorf("checkpoint: diff %s: %w", dir, err)
	}
	return d, nil
}

func diff(ctx context.Context, dir, base, commit string, max int) (Diff, error) {
	r, missing, err := open(ctx, dir)
	if err != nil {
		return Diff{}, err
	}
	if missing != "" {
		return Diff{}, errors.New(missing)
	}
	if max <= 0 {
		max = DefaultDiffMax
	}
	if base == "" {
		base = r.emptyTree
	}
	w := &capWriter{max: max}
	if _, err := (gitexec.Cmd{Dir: r.dir, Read: true, Stdout: w}).Run(ctx,
		"diff-tree", "-p", "-r", "--no-renames", "--no-color", "--no-ext-diff", "--no-textconv", base, commit); err != nil {
		return Diff{}, err
	}
	if w.size <= int64(max) {
		return Diff{Text: w.buf.String(), Size: w.size}, nil
	}
	text := w.buf.Bytes()
	if i := bytes.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i+1]
	}
	marker := fmt.Sprintf("[baton: diff cut at %d of %d bytes]\n", len(text), w.size)
	if len(text) > 0 && text[len(text)-1] != '\n' {
		marker = "\n" + marker
	}
	return Diff{Text: string(text) + marker, Truncated: true, Size: w.size}, nil
}

// capWriter keeps the first max bytes written to it and counts the rest.
type capWriter struct {
	max  int
	buf  bytes.Buffer
	size int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.size += int64(len(p))
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// DeleteRefs deletes checkpoint refs in one transaction. A ref that does
// not exist, or a dir no longer in a git work tree, is not an error: there
// is nothing to delete.
func (s *Service) DeleteRefs(ctx context.Context, dir string, refs ...string) error {
	if len(refs) == 0 {
		return nil
	}
	r, missing, err := s.open(ctx, dir)
	if err != nil {
		return fmt.Errorf("checkpoint: delete refs in %s: %w", dir, err)
	}
	if missing != "" {
		return nil
	}
	var in bytes.Buffer
	for _, ref := range refs {
		if ref == "" || strings.ContainsRune(ref, 0) {
			return fmt.Errorf("checkpoint: delete refs in %s: invalid ref %q", dir, ref)
		}
		fmt.Fprintf(&in, "delete %s\x00\x00", ref)
	}
	if _, err := (gitexec.Cmd{Dir: r.dir, Stdin: in.Bytes()}).Run(ctx, "update-ref", "-z", "--stdin"); err != nil {
		return fmt.Errorf("checkpoint: delete refs in %s: %w", dir, err)
	}
	return nil
}

// modeGitlink is a submodule's mode in a tree.
const modeGitlink = "160000"

// rawChange is one record of `git diff-tree --raw`.
type rawChange struct {
	oldMode, newMode string
	newID            string
	status           byte // A, D, M or T
	path             string
}

// numstat is one record of `git diff-tree --numstat`.
type numstat struct {
	additions, deletions int
	binary               bool
}

// parseDiffTree parses `git diff-tree -z --raw [--numstat]` output without
// renames: raw records (":old new oldid newid S\0path\0"), then numstat
// records ("add\tdel\tpath\0").
func parseDiffTree(out []byte) ([]rawChange, map[string]numstat, error) {
	var changes []rawChange
	stats := map[string]numstat{}
	fields := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch {
		case f == "":
		case f[0] == ':':
			meta := strings.Fields(f[1:])
			if len(meta) != 5 || len(meta[4]) == 0 || i+1 >= len(fields) {
				return nil, nil, fmt.Errorf("git diff-tree: unexpected record %q", f)
			}
			i++
			changes = append(changes, rawChange{oldMode: meta[0], newMode: meta[1], newID: meta[3], status: meta[4][0], path: fields[i]})
		default:
			add, rest, ok1 := strings.Cut(f, "\t")
			del, path, ok2 := strings.Cut(rest, "\t")
			if !ok1 || !ok2 {
				return nil, nil, fmt.Errorf("git diff-tree: unexpected record %q", f)
			}
			if add == "-" && del == "-" {
				stats[path] = numstat{binary: true}
				continue
			}
			a, err1 := strconv.ParseUint(add, 10, 31)
			d, err2 := strconv.ParseUint(del, 10, 31)
			if err1 != nil || err2 != nil {
				return nil, nil, fmt.Errorf("git diff-tree: unexpected record %q", f)
			}
			stats[path] = numstat{additions: int(a), deletions: int(d)}
		}
	}
	return changes, stats, nil
}

// parseSummary turns `git diff-tree -z --raw --numstat` output into file
// changes sorted by path.
func parseSummary(out []byte) ([]FileChange, error) {
	changes, stats, err := parseDiffTree(out)
	if err != nil {
		return nil, err
	}
	files := make([]FileChange, 0, len(changes))
	for _, c := range changes {
		st := stats[c.path]
		files = append(files, FileChange{
			Path: c.path, Kind: kind(c.status),
			Additions: st.additions, Deletions: st.deletions, Binary: st.binary,
		})
	}
	slices.SortFunc(files, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

func kind(status byte) string {
	switch status {
	case 'A':
		return KindAdded
	case 'D':
		return KindDeleted
	case 'T':
		return KindTypeChanged
	}
	return KindModified
}
