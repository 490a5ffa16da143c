package worktree

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The parsers read what git writes, odd paths included.
func TestParsers(t *testing.T) {
	list, err := parseWorktreeList("worktree /r\x00HEAD aaa\x00branch refs/heads/main\x00\x00" +
		"worktree /w t\x00HEAD bbb\x00detached\x00locked why\x00prunable gitdir file points to non-existent location\x00\x00" +
		"worktree /bare\x00bare\x00\x00")
	want := []listed{{Path: "/r", Head: "aaa", Branch: "main"}, {Path: "/w t", Head: "bbb", Prunable: true}, {Path: "/bare", Bare: true}}
	if diff := cmp.Diff(want, list); err != nil || diff != "" {
		t.Errorf("parseWorktreeList = %v (-want +got):\n%s", err, diff)
	}

	paths, err := parseStatus(" M a\x00?? new\nline\x00R  to\x00from\x00A  a\x00")
	if diff := cmp.Diff([]string{"a", "from", "new\nline", "to"}, paths); err != nil || diff != "" {
		t.Errorf("parseStatus = %v (-want +got):\n%s", err, diff)
	}

	tree := strings.Repeat("a", 40)
	got, conflicts, err := parseMergeTree(tree+"\x00b\x00a\x00a\x00", true)
	if err != nil || got != tree || !cmp.Equal(conflicts, []string{"a", "b"}) {
		t.Errorf("parseMergeTree of a conflict = %q, %q, %v", got, conflicts, err)
	}

	if major, minor, ok := parseVersion("git version 2.39.5\n"); !ok || major != 2 || minor != 39 {
		t.Errorf("parseVersion = %d.%d %v", major, minor, ok)
	}
	if major, minor, ok := parseVersion("git version 2.37.1 (Apple Git-137.1)"); !ok || major != 2 || minor != 37 {
		t.Errorf("parseVersion of Apple's git = %d.%d %v", major, minor, ok)
	}
}

// Output git would not write is refused, never half read.
func TestParsersRefuse(t *testing.T) {
	tree := strings.Repeat("a", 40)
	for name, err := range map[string]error{
		"worktree list: attribute first":    second(parseWorktreeList("HEAD aaa\x00\x00")),
		"worktree list: record not ended":   second(parseWorktreeList("worktree /a\x00worktree /b\x00\x00")),
		"worktree list: output cut":         second(parseWorktreeList("worktree /a\x00HEAD aaa\x00")),
		"numstat: no NUL at the end":        second(parseNumstat("1\t2\ta")),
		"numstat: one count":                second(parseNumstat("1\ta\x00")),
		"numstat: negative":                 second(parseNumstat("-1\t2\ta\x00")),
		"numstat: half binary":              second(parseNumstat("-\t2\ta\x00")),
		"status: short record":              second(parseStatus("M\x00")),
		"status: rename without source":     second(parseStatus("R  to\x00")),
		"merge-tree: no tree":               third(parseMergeTree("conflict\x00", false)),
		"merge-tree: clean with paths":      third(parseMergeTree(tree+"\x00a\x00", false)),
		"merge-tree: conflict with no path": third(parseMergeTree(tree+"\x00", true)),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func second[A any](_ A, err error) error        { return err }
func third[A, B any](_ A, _ B, err error) error { return err }

func FuzzParseWorktreeList(f *testing.F) {
	f.Add("worktree /r\x00HEAD aaa\x00branch refs/heads/main\x00\x00worktree /b\x00bare\x00\x00")
	f.Fuzz(func(t *testing.T, out string) {
		list, err := parseWorktreeList(out)
		if err != nil {
			return
		}
		for _, w := range list {
			if w.Path == "" {
				t.Errorf("a worktree with no path from %q", out)
			}
		}
	})
}

func FuzzParseNumstat(f *testing.F) {
	f.Add("1\t2\ta\x00-\t-\tbin\x000\t0\tc d\x00")
	f.Fuzz(func(t *testing.T, out string) {
		s, err := parseNumstat(out)
		if err != nil {
			return
		}
		if s.Files != len(s.Paths) || s.Added < 0 || s.Removed < 0 || s.Files != strings.Count(out, "\x00") {
			t.Errorf("parseNumstat(%q) = %+v: counts disagree", out, s)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add(" M a\x00?? b\x00R  c\x00d\x00")
	f.Fuzz(func(t *testing.T, out string) {
		paths, err := parseStatus(out)
		if err != nil {
			return
		}
		for _, p := range paths {
			if p == "" || !strings.Contains(out, p) {
				t.Errorf("parseStatus(%q) made up path %q", out, p)
			}
		}
	})
}

func FuzzParseMergeTree(f *testing.F) {
	tree := strings.Repeat("0", 40)
	f.Add(tree+"\x00a\x00b\x00", true)
	f.Add(tree+"\x00", false)
	f.Fuzz(func(t *testing.T, out string, conflict bool) {
		got, paths, err := parseMergeTree(out, conflict)
		if err != nil {
			return
		}
		if !isObjectID(got) || conflict != (len(paths) > 0) {
			t.Errorf("parseMergeTree(%q, %v) = %q, %q", out, conflict, got, paths)
		}
	})
}
