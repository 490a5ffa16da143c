package worktree

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/baton-run/baton/host/internal/gitexec"
)

// defaultAuthor signs commits when neither the caller nor git config in
// the worktree names an author.
const defaultAuthor = "Baton <baton@localhost>"

// git runs a git command in dir that may write, and returns its stdout
// without the trailing newline.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitexec.Cmd{Dir: dir}.Run(ctx, args...)
	return strings.TrimSuffix(string(out), "\n"), err
}

// gitRead runs a read-only git command in dir (one that takes no optional
// locks, so it never refreshes an index) and returns its stdout without
// the trailing newline.
func gitRead(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitexec.Cmd{Dir: dir, Read: true}.Run(ctx, args...)
	return strings.TrimSuffix(string(out), "\n"), err
}

// gitReadRaw is gitRead for output whose last byte matters (-z output).
func gitReadRaw(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitexec.Cmd{Dir: dir, Read: true}.Run(ctx, args...)
	return string(out), err
}

// raceTries bounds how often a worktree command that tripped over another
// one's half-written entry is tried (racedWorktree).
const raceTries = 6

// racedWorktree says whether err is git tripping over a worktree entry
// another git command is writing: every `git worktree` command reads each
// .git/worktrees/ID/ of the repository, and one being added may not have
// all its files yet ("fatal: failed to read .git/worktrees/ID/commondir:
// Success"). Several threads made at once on one repository meet it;
// the command goes through when tried again.
func racedWorktree(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "failed to read") && strings.Contains(msg, "worktrees/")
}

// retryRaced runs f until it does not trip over another worktree command
// (racedWorktree), at most raceTries times, a little longer apart each
// time.
func retryRaced(ctx context.Context, f func() error) error {
	err := f()
	for i := 1; i < raceTries && racedWorktree(err); i++ {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(i*i) * 10 * time.Millisecond):
		}
		err = f()
	}
	return err
}

// listWorktrees lists the worktrees of root's repository, the main one
// first.
func listWorktrees(ctx context.Context, root string) ([]listed, error) {
	var out string
	err := retryRaced(ctx, func() (err error) {
		out, err = gitReadRaw(ctx, root, "worktree", "list", "--porcelain", "-z")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	return parseWorktreeList(out)
}

// resolve returns the full object id rev names in dir, or "" and no error
// when it names nothing.
func resolve(ctx context.Context, dir, rev string) (string, error) {
	out, err := gitRead(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", rev)
	if gitexec.ExitCode(err) == 1 {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", rev, err)
	}
	return out, nil
}

// branchHead returns the commit branch points at in dir's repository, or
// "" when there is no such branch.
func branchHead(ctx context.Context, dir, branch string) (string, error) {
	return resolve(ctx, dir, "refs/heads/"+branch+"^{commit}")
}

// resolveAll returns the full object ids revs name in dir, in one git
// command; an error names the first rev that names nothing.
func resolveAll(ctx context.Context, dir string, revs ...string) ([]string, error) {
	for _, rev := range revs {
		if strings.HasPrefix(rev, "-") {
			return nil, fmt.Errorf("%q is not a revision", rev)
		}
	}
	out, err := gitRead(ctx, dir, append(append([]string{"rev-parse"}, revs...), "--")...)
	ids := strings.Split(out, "\n")
	if err == nil && len(ids) == len(revs)+1 && ids[len(revs)] == "--" {
		return ids[:len(revs)], nil
	}
	for _, rev := range revs { // find which one
		id, err := resolve(ctx, dir, rev)
		if err != nil {
			return nil, err
		}
		if id == "" {
			return nil, fmt.Errorf("%s names nothing in %s", rev, dir)
		}
	}
	if err == nil {
		err = fmt.Errorf("unexpected output %q", out)
	}
	return nil, fmt.Errorf("resolve %s: %w", strings.Join(revs, " "), err)
}

// casBranch points branch at to if it is at from now (compare-and-swap),
// with reason in the reflog.
func casBranch(ctx context.Context, dir, branch, to, from, reason string) error {
	if _, err := git(ctx, dir, "update-ref", "-m", reason, "refs/heads/"+branch, to, from); err != nil {
		return fmt.Errorf("move branch %s from %s to %s: %w", branch, short(from), short(to), err)
	}
	return nil
}

// resetIndex makes the index of the worktree dir match tree-ish to without
// touching its files. Entries whose content is unchanged keep their stat
// information, so git status stays cheap; unmerged entries are dropped.
func resetIndex(ctx context.Context, dir, to string) error {
	if _, err := git(ctx, dir, "read-tree", "--reset", to); err != nil {
		return fmt.Errorf("reset the index of %s to %s: %w", dir, short(to), err)
	}
	return nil
}

// identityRe splits "Name <email>".
var identityRe = regexp.MustCompile(`^\s*([^<>]*?)\s*<([^<>]*)>\s*$`)

// identityEnv is the environment that makes git record who ("Name
// <email>") as author and committer at at.
func identityEnv(who string, at time.Time) ([]string, error) {
	m := identityRe.FindStringSubmatch(who)
	if m == nil || m[1] == "" {
		return nil, fmt.Errorf("author %q is not of the form \"Name <email>\"", who)
	}
	date := fmt.Sprintf("@%d %s", at.Unix(), at.Format("-0700"))
	return []string{
		"GIT_AUTHOR_NAME=" + m[1], "GIT_AUTHOR_EMAIL=" + m[2], "GIT_AUTHOR_DATE=" + date,
		"GIT_COMMITTER_NAME=" + m[1], "GIT_COMMITTER_EMAIL=" + m[2], "GIT_COMMITTER_DATE=" + date,
	}, nil
}

// configAuthor is "Name <email>" from user.name and user.email in git
// config as dir sees it, or "" when either is unset.
func configAuthor(ctx context.Context, dir string) (string, error) {
	out, err := gitRead(ctx, dir, "config", "-z", "--get-regexp", `^user\.(name|email)$`)
	if gitexec.ExitCode(err) == 1 { // none set
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the author from git config: %w", err)
	}
	var name, email string
	for rec := range strings.SplitSeq(out, "\x00") {
		key, value, _ := strings.Cut(rec, "\n")
		switch key {
		case "user.name":
			name = value
		case "user.email":
			email = value
		}
	}
	if name == "" || email == "" {
		return "", nil
	}
	return name + " <" + email + ">", nil
}

// commitTree writes a commit of tree with parents and message, by author
// at at, and returns its id. It changes no ref.
func commitTree(ctx context.Context, dir, tree string, parents []string, message, author string, at time.Time) (string, error) {
	env, err := identityEnv(author, at)
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", "--no-gpg-sign", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n"
	}
	out, err := gitexec.Cmd{Dir: dir, Env: env, Stdin: []byte(message)}.Run(ctx, append(args, "-F", "-")...)
	if err != nil {
		return "", fmt.Errorf("write a commit of tree %s: %w", short(tree), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// errOldGit is returned by Merge when git cannot check a merge without a
// worktree.
var errOldGit = errors.New("merging needs git 2.38 or later (for git merge-tree --write-tree)")

// checkVersion returns errOldGit unless git is 2.38 or later.
func checkVersion(ctx context.Context) error {
	out, err := gitRead(ctx, "", "version")
	if err != nil {
		return fmt.Errorf("find git's version: %w", err)
	}
	major, minor, ok := parseVersion(out)
	if !ok {
		return fmt.Errorf("find git's version: unexpected output %q", out)
	}
	if major < 2 || major == 2 && minor < 38 {
		return fmt.Errorf("%w; this is %s", errOldGit, out)
	}
	return nil
}

// short is an object id cut for messages.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// gitStdin runs a git command in dir that may write, with stdin.
func gitStdin(ctx context.Context, dir, stdin string, args ...string) (string, error) {
	out, err := gitexec.Cmd{Dir: dir, Stdin: []byte(stdin)}.Run(ctx, args...)
	return strings.TrimSuffix(string(out), "\n"), err
}
