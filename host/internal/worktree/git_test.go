package worktree

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// Worktrees made at once on one repository all get made: git commands
// that trip over another's half-written worktree entry are tried again.
func TestCreateAtOnce(t *testing.T) {
	root := newRepo(t, map[string]string{"a.txt": "a\n"})
	base := gitT(t, root, "rev-parse", "HEAD")
	dir := filepath.Join(filepath.Dir(root), "data", "worktrees")
	const n = 8
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				name := fmt.Sprintf("t%d-%d", round, i)
				_, errs[i] = Create(t.Context(), Spec{Root: root, Path: filepath.Join(dir, name), Branch: "baton/" + name, Base: base})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	list, err := listWorktrees(t.Context(), root)
	if err != nil || len(list) != 3*n+1 {
		t.Fatalf("%d worktrees listed, want %d: %v", len(list), 3*n+1, err)
	}
}

func TestRetryRaced(t *testing.T) {
	raced := errors.New("git worktree add: fatal: failed to read .git/worktrees/t1/commondir: Success")
	for _, tc := range []struct {
		name  string
		fails []error
		calls int
		err   error
	}{
		{"through at once", nil, 1, nil},
		{"through on the third try", []error{raced, raced}, 3, nil},
		{"another error is not tried again", []error{errors.New("fatal: invalid reference")}, 1, errors.New("fatal: invalid reference")},
		{"at most raceTries", []error{raced, raced, raced, raced, raced, raced, raced}, raceTries, raced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryRaced(t.Context(), func() error {
				calls++
				if calls <= len(tc.fails) {
					return tc.fails[calls-1]
				}
				return nil
			})
			if calls != tc.calls || fmt.Sprint(err) != fmt.Sprint(tc.err) {
				t.Fatalf("%d calls, %v; want %d, %v", calls, err, tc.calls, tc.err)
			}
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	if err := retryRaced(ctx, func() error { calls++; return raced }); err != raced || calls != 1 {
		t.Fatalf("a cancelled context: %d calls, %v", calls, err)
	}
}
