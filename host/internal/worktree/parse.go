package worktree

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file reads git's machine output. Every parser takes the whole
// output and either understands all of it or fails: a record git would
// not write is an error, never half read.

// listed is one worktree from git worktree list --porcelain -z.
type listed struct {
	Path     string
	Head     string // commit id; "" in a repository with no commits
	Branch   string // short name; "" when detached or bare
	Bare     bool
	Prunable bool // git knows its directory is gone
}

// parseWorktreeList reads git worktree list --porcelain -z: records of
// NUL-terminated "key value" attributes, each record ended by an empty
// attribute.
func parseWorktreeList(out string) ([]listed, error) {
	if out == "" {
		return nil, nil
	}
	body, ok := strings.CutSuffix(out, "\x00")
	if !ok {
		return nil, fmt.Errorf("git worktree list: output does not end with NUL")
	}
	var list []listed
	var cur *listed
	for attr := range strings.SplitSeq(body, "\x00") {
		if attr == "" {
			cur = nil
			continue
		}
		key, value, _ := strings.Cut(attr, " ")
		if key == "worktree" {
			if cur != nil {
				return nil, fmt.Errorf("git worktree list: record for %q does not end before %q", cur.Path, value)
			}
			if value == "" {
				return nil, fmt.Errorf("git worktree list: worktree with no path")
			}
			list = append(list, listed{Path: value})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("git worktree list: %q outside a worktree record", attr)
		}
		switch key {
		case "HEAD":
			cur.Head = value
		case "branch":
			cur.Branch = strings.TrimPrefix(value, "refs/heads/")
		case "bare":
			cur.Bare = true
		case "prunable":
			cur.Prunable = true
		}
		// detached, locked and attributes newer git adds say nothing we use.
	}
	if cur != nil {
		return nil, fmt.Errorf("git worktree list: output ends inside the record for %q", cur.Path)
	}
	return list, nil
}

// parseNumstat reads git diff-tree --numstat -z --no-renames: one
// "added<TAB>removed<TAB>path" record per file, NUL-terminated, with "-"
// for both counts of a binary file (counted as 0).
func parseNumstat(out string) (Stat, error) {
	var s Stat
	if out == "" {
		return s, nil
	}
	if !strings.HasSuffix(out, "\x00") {
		return Stat{}, fmt.Errorf("git diff --numstat: output does not end with NUL")
	}
	for rec := range strings.SplitSeq(strings.TrimSuffix(out, "\x00"), "\x00") {
		added, rest, ok1 := strings.Cut(rec, "\t")
		removed, path, ok2 := strings.Cut(rest, "\t")
		if !ok1 || !ok2 || path == "" {
			return Stat{}, fmt.Errorf("git diff --numstat: malformed record %q", rec)
		}
		a, err1 := count(added)
		r, err2 := count(removed)
		if err1 != nil || err2 != nil || (added == "-") != (removed == "-") {
			return Stat{}, fmt.Errorf("git diff --numstat: malformed counts in %q", rec)
		}
		s.Files++
		s.Added += a
		s.Removed += r
		s.Paths = append(s.Paths, path)
	}
	slices.Sort(s.Paths)
	return s, nil
}

// count reads one numstat count: a decimal, or "-" for a binary file.
func count(s string) (int, error) {
	if s == "-" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || s != strconv.Itoa(n) {
		return 0, fmt.Errorf("bad count %q", s)
	}
	return n, nil
}

// parseStatus reads git status --porcelain=v1 -z and returns every path
// it names (both sides of a rename), sorted, without duplicates. A record
// is "XY path"; a rename or copy (X or Y is R or C) is followed by a
// second record holding the source path.
func parseStatus(out string) ([]string, error) {
	if out == "" {
		return nil, nil
	}
	if !strings.HasSuffix(out, "\x00") {
		return nil, fmt.Errorf("git status: output does not end with NUL")
	}
	recs := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	var paths []string
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 4 || rec[2] != ' ' {
			return nil, fmt.Errorf("git status: malformed record %q", rec)
		}
		paths = append(paths, rec[3:])
		if strings.ContainsAny(rec[:2], "RC") {
			i++
			if i == len(recs) || recs[i] == "" {
				return nil, fmt.Errorf("git status: rename of %q has no source", rec[3:])
			}
			paths = append(paths, recs[i])
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

// parseMergeTree reads git merge-tree --write-tree --name-only -z
// --no-messages: the tree id, NUL, then (only on a conflict) each
// conflicted path, NUL-terminated. It returns the tree and the conflicted
// paths, sorted.
func parseMergeTree(out string, conflict bool) (tree string, paths []string, err error) {
	tree, rest, ok := strings.Cut(out, "\x00")
	if !ok || !isObjectID(tree) {
		return "", nil, fmt.Errorf("git merge-tree: output %q does not start with a tree id", truncate(out))
	}
	if !conflict {
		if rest != "" {
			return "", nil, fmt.Errorf("git merge-tree: unexpected output %q after the tree of a clean merge", truncate(rest))
		}
		return tree, nil, nil
	}
	list, ok := strings.CutSuffix(rest, "\x00")
	if !ok || list == "" {
		return "", nil, fmt.Errorf("git merge-tree: conflict with no list of paths in %q", truncate(out))
	}
	for p := range strings.SplitSeq(list, "\x00") {
		if p == "" {
			return "", nil, fmt.Errorf("git merge-tree: empty path in %q", truncate(out))
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return tree, slices.Compact(paths), nil
}

// parseVersion reads "git version 2.39.5" (with any suffix after the
// minor version) and returns major and minor.
func parseVersion(out string) (major, minor int, ok bool) {
	v, ok := strings.CutPrefix(strings.TrimSpace(out), "git version ")
	if !ok {
		return 0, 0, false
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major, minor, err1 == nil && err2 == nil
}

// isObjectID says whether s is a full SHA-1 or SHA-256 id in hex.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// truncate cuts s for an error message.
func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
