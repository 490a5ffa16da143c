package gitexec

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// A git that does not start is an error naming the subcommand and the
// cause, which it unwraps to; it has no exit status.
func TestStartFailure(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	_, err := Cmd{Dir: gone}.Run(t.Context(), "rev-parse")
	var ge *Error
	if !errors.As(err, &ge) || ge.ExitCode() != -1 || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("git in a directory that is not there: %#v, want an Error with no exit status wrapping fs.ErrNotExist", err)
	}
	if want := "git rev-parse: chdir " + gone + ": no such file or directory"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// A git that fails names the subcommand, its exit status and its stderr.
func TestExitFailure(t *testing.T) {
	dir := t.TempDir()
	_, err := Cmd{Dir: dir}.Run(t.Context(), "rev-parse", "--verify", "nope^{commit}")
	if got := ExitCode(err); got != 128 {
		t.Fatalf("exit code %d (%v), want 128", got, err)
	}
	if !strings.HasPrefix(err.Error(), "git rev-parse: exit status 128: fatal: not a git repository") {
		t.Errorf("error %q, want the subcommand, status and stderr", err)
	}
}

// GIT_DIR and friends in Baton's environment do not redirect git.
func TestScrubsInheritedEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_DIR", filepath.Join(dir, "elsewhere"))
	if _, err := (Cmd{Dir: dir}).Run(t.Context(), "init", "-q"); err != nil {
		t.Fatal(err)
	}
	out, err := Cmd{Dir: dir, Read: true}.Run(t.Context(), "rev-parse", "--absolute-git-dir")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), filepath.Join(dir, ".git"); got != want {
		t.Errorf("git dir %q, want %q (GIT_DIR from the environment was followed)", got, want)
	}
}

// An error quotes at most three non-empty lines of git's stderr, and at
// most 512 bytes of them.
func TestFirstLines(t *testing.T) {
	long := strings.Repeat("x", 600)
	for _, c := range []struct{ in, want string }{
		{"\n  one \n\ntwo\nthree\nfour\n", "one; two; three"},
		{long + "\nsecond", long[:512] + "..."},
		{"\n \n", ""},
	} {
		if got := FirstLines(c.in, 3); got != c.want {
			t.Errorf("FirstLines(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
