package checkpoint

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// pathPool names the files runs write. Some are both a file and a
// directory ("a", "a/x"), so runs replace files with directories and back.
// "c/" is only ever a directory: ignored files live there and at the top,
// where no restore has a reason to remove their directory.
var (
	pathPool    = []string{"a", "b", "a/x", "a/y", "a/b/x", "b/z", "c/d/e", "c/f", "top.txt"}
	ignoredPool = []string{"n.log", "c/n.log"}
	linkTargets = []string{"a", "../top.txt", "nowhere"}
)

// Property: after runs of random writes, symlinks, chmods, deletes and
// renames, each followed by a capture, with restores between them, a
// restore makes the directory exactly the checkpoint as it was captured,
// leaving ignored files (and, for a subdirectory, everything outside it)
// alone, and writes and removes only the paths that differ.
func TestRestoreProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		top := newRepo(t)
		w := &workdir{t: rt, dir: top, files: map[string]file{}, ignored: map[string]file{}}
		if rapid.Bool().Draw(rt, "subdir") {
			w.dir = filepath.Join(top, "w")
			writeFiles(rt, top, map[string]string{"outside.txt": "outside\n"})
		}
		writeFiles(rt, top, map[string]string{".gitignore": "*.log\n"})
		if w.dir == top {
			w.files[".gitignore"] = file{Content: "*.log\n"}
		} else if err := os.MkdirAll(w.dir, 0o755); err != nil {
			rt.Fatal(err)
		}
		if rapid.Bool().Draw(rt, "commit first") {
			gitT(rt, top, "add", ".")
			gitT(rt, top, "commit", "-q", "--allow-empty", "-m", "init")
		}

		s := New()
		var checkpoints []string
		snapshots := map[string]map[string]file{}
		steps := rapid.IntRange(1, 4).Draw(rt, "steps")
		for step := range steps + 1 {
			if len(checkpoints) > 0 && (step == steps || rapid.IntRange(0, 2).Draw(rt, "restore?") == 0) {
				commit := rapid.SampledFrom(checkpoints).Draw(rt, "restore to")
				w.restore(s, commit, snapshots[commit])
				continue
			}
			for range rapid.IntRange(1, 6).Draw(rt, "ops") {
				w.op(rt)
			}
			res, err := s.Capture(rt.Context(), w.dir, fmt.Sprintf("refs/baton/p/%d", step), "", now)
			if err != nil || res.Status != StatusReady {
				rt.Fatalf("capture: %+v, %v", res, err)
			}
			checkpoints = append(checkpoints, res.Commit)
			snapshots[res.Commit] = maps.Clone(w.files)
		}
		if w.dir != top {
			if b, err := os.ReadFile(filepath.Join(top, "outside.txt")); err != nil || string(b) != "outside\n" {
				rt.Errorf("outside.txt is %q (%v) after restores inside w/", b, err)
			}
		}
	})
}

// workdir is the directory under test and a model of its files.
type workdir struct {
	t       *rapid.T
	dir     string
	files   map[string]file // checkpointed files by path
	ignored map[string]file // ignored files: never checkpointed, never restored
}

func (w *workdir) path(p string) string { return filepath.Join(w.dir, filepath.FromSlash(p)) }

// op does one random change to the directory and the model.
func (w *workdir) op(rt *rapid.T) {
	switch rapid.IntRange(0, 5).Draw(rt, "op") {
	case 0, 1: // write, often in place
		p := rapid.SampledFrom(pathPool).Draw(rt, "write")
		content := rapid.StringMatching(`[ab\n]{0,6}`).Draw(rt, "content")
		exec := rapid.IntRange(0, 3).Draw(rt, "exec") == 0
		w.makeRoom(p)
		if f, ok := w.files[p]; ok && f.Link {
			w.must(os.Remove(w.path(p)))
		}
		w.must(os.WriteFile(w.path(p), []byte(content), 0o644))
		mode := os.FileMode(0o644)
		if exec {
			mode = 0o755
		}
		w.must(os.Chmod(w.path(p), mode))
		w.files[p] = file{Content: content, Exec: exec}
	case 2: // symlink
		p := rapid.SampledFrom(pathPool).Draw(rt, "symlink")
		target := rapid.SampledFrom(linkTargets).Draw(rt, "target")
		w.makeRoom(p)
		if _, ok := w.files[p]; ok {
			w.must(os.Remove(w.path(p)))
		}
		w.must(os.Symlink(target, w.path(p)))
		w.files[p] = file{Content: target, Link: true}
	case 3: // delete
		p := rapid.SampledFrom(pathPool).Draw(rt, "delete")
		if _, ok := w.files[p]; ok {
			w.must(os.Remove(w.path(p)))
			delete(w.files, p)
		}
	case 4: // rename
		from := rapid.SampledFrom(pathPool).Draw(rt, "rename from")
		to := rapid.SampledFrom(pathPool).Draw(rt, "rename to")
		f, ok := w.files[from]
		if !ok || from == to || strings.HasPrefix(from, to+"/") {
			return
		}
		w.makeRoom(to) // may remove from, if it is a parent of to
		if _, still := w.files[from]; !still {
			return
		}
		if g, ok := w.files[to]; ok && !g.Link {
			// rename replaces a file in place
		} else if ok {
			w.must(os.Remove(w.path(to)))
		}
		w.must(os.Rename(w.path(from), w.path(to)))
		delete(w.files, from)
		w.files[to] = f
	case 5: // an ignored file
		p := rapid.SampledFrom(ignoredPool).Draw(rt, "ignored")
		content := rapid.StringMatching(`[xy]{0,4}`).Draw(rt, "ignored content")
		w.must(os.MkdirAll(filepath.Dir(w.path(p)), 0o755))
		w.must(os.WriteFile(w.path(p), []byte(content), 0o644))
		w.ignored[p] = file{Content: content}
	}
}

// makeRoom clears the way for a file at p: files that are its parents
// go, and a directory at p goes with everything in it.
func (w *workdir) makeRoom(p string) {
	for q := p; strings.Contains(q, "/"); {
		q = q[:strings.LastIndex(q, "/")]
		if _, ok := w.files[q]; ok {
			w.must(os.Remove(w.path(q)))
			delete(w.files, q)
		}
	}
	if fi, err := os.Lstat(w.path(p)); err == nil && fi.IsDir() {
		w.must(os.RemoveAll(w.path(p)))
		for q := range w.files {
			if strings.HasPrefix(q, p+"/") {
				delete(w.files, q)
			}
		}
		for q := range w.ignored {
			if strings.HasPrefix(q, p+"/") {
				delete(w.ignored, q)
			}
		}
	}
	w.must(os.MkdirAll(filepath.Dir(w.path(p)), 0o755))
}

// restore restores commit and checks the directory is snapshot plus the
// ignored files, and that exactly the differing paths were touched.
func (w *workdir) restore(s *Service, commit string, snapshot map[string]file) {
	got, err := s.Restore(w.t.Context(), w.dir, commit)
	if err != nil {
		w.t.Fatal(err)
	}
	var written, removed []string
	for p, f := range snapshot {
		if g, ok := w.files[p]; !ok || g != f {
			written = append(written, p)
		}
	}
	for p := range w.files {
		if _, ok := snapshot[p]; !ok {
			removed = append(removed, p)
		}
	}
	slices.Sort(written)
	slices.Sort(removed)
	if diff := cmp.Diff(Restored{Written: written, Removed: removed}, got); diff != "" {
		w.t.Errorf("restore %s wrote and removed (-want +got):\n%s", commit, diff)
	}

	w.files = maps.Clone(snapshot)
	want := maps.Clone(snapshot)
	maps.Copy(want, w.ignored)
	if diff := cmp.Diff(want, diskFiles(w.t, w.dir)); diff != "" {
		w.t.Fatalf("after restoring %s (-checkpoint +disk):\n%s", commit, diff)
	}
}

func (w *workdir) must(err error) {
	if err != nil {
		w.t.Helper()
		w.t.Fatal(err)
	}
}
