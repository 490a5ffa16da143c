package rawframes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// older says whether a comes before b in the order logs are deleted.
func older(a, b File) bool {
	if c := a.ModTime.Compare(b.ModTime); c != 0 {
		return c < 0
	}
	return a.Name < b.Name
}

// The rule, as properties of what it picks from any set of logs: nothing
// in use goes; everything of age goes; then the oldest go, and no more
// than needed to get under the size bound (or until only logs in use are
// left); next is when the first kept log comes of age.
func TestSelectProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(rt, "n")
		var files []File
		for i := range n {
			files = append(files, File{Name: fmt.Sprintf("ses_%02d.ndjson", i),
				Size:    rapid.Int64Range(0, 100).Draw(rt, "size"),
				ModTime: t0.Add(time.Duration(rapid.IntRange(0, 20).Draw(rt, "hour")) * time.Hour),
				InUse:   rapid.IntRange(0, 3).Draw(rt, "inuse") == 0})
		}
		now := t0.Add(time.Duration(rapid.IntRange(0, 30).Draw(rt, "now")) * time.Hour)
		p := Policy{MaxBytes: rapid.Int64Range(-1, 400).Draw(rt, "maxBytes"),
			MaxAge: time.Duration(rapid.IntRange(-1, 15).Draw(rt, "maxAge")) * time.Hour}
		maxBytes, maxAge := p.Limits()
		del, next := Select(files, now, p)

		gone := map[string]bool{}
		for _, d := range del {
			gone[d] = true
		}
		byName := map[string]File{}
		for _, f := range files {
			byName[f.Name] = f
		}
		var kept, deleted []File
		var keptBytes int64
		for _, f := range files {
			if gone[f.Name] {
				deleted = append(deleted, f)
				continue
			}
			kept = append(kept, f)
			keptBytes += f.Size
		}
		if len(gone) != len(del) {
			rt.Fatalf("a file picked twice: %v", del)
		}
		if !slices.IsSortedFunc(del, func(a, b string) int {
			if older(byName[a], byName[b]) {
				return -1
			}
			return 1
		}) {
			rt.Fatalf("not oldest first: %v", del)
		}
		slices.SortFunc(deleted, func(a, b File) int {
			if older(a, b) {
				return -1
			}
			return 1
		})
		var bySize []File // oldest first
		for _, f := range deleted {
			if f.InUse {
				rt.Fatalf("deleted %s, in use", f.Name)
			}
			if maxAge == 0 || now.Sub(f.ModTime) < maxAge {
				bySize = append(bySize, f)
			}
		}
		var wantNext time.Time
		for _, f := range kept {
			if f.InUse {
				continue
			}
			if maxAge > 0 && now.Sub(f.ModTime) >= maxAge {
				rt.Fatalf("kept %s, %v old (max %v)", f.Name, now.Sub(f.ModTime), maxAge)
			}
			if maxBytes > 0 && keptBytes > maxBytes {
				rt.Fatalf("kept %s with %d bytes left (max %d)", f.Name, keptBytes, maxBytes)
			}
			for _, d := range deleted {
				if older(f, d) {
					rt.Fatalf("kept %s, deleted the newer %s", f.Name, d.Name)
				}
			}
			if at := f.ModTime.Add(maxAge); maxAge > 0 && (wantNext.IsZero() || at.Before(wantNext)) {
				wantNext = at
			}
		}
		if len(bySize) > 0 {
			if maxBytes == 0 {
				rt.Fatalf("deleted %v by size with no size bound", bySize)
			}
			if last := bySize[len(bySize)-1]; keptBytes+last.Size <= maxBytes {
				rt.Fatalf("deleted %s, not needed: %d bytes with it (max %d)", last.Name, keptBytes+last.Size, maxBytes)
			}
		}
		if !next.Equal(wantNext) {
			rt.Fatalf("next %v, want %v", next, wantNext)
		}
	})
}

func TestSelectExamples(t *testing.T) {
	day := 24 * time.Hour
	files := []File{
		{Name: "a.ndjson.1", Size: 100, ModTime: t0.Add(-20 * day)},
		{Name: "a.ndjson", Size: 10, ModTime: t0.Add(-15 * day)},
		{Name: "b.ndjson", Size: 300, ModTime: t0.Add(-20 * day), InUse: true},
		{Name: "c.ndjson", Size: 200, ModTime: t0.Add(-2 * day)},
		{Name: "d.ndjson", Size: 50, ModTime: t0.Add(-1 * day)},
		{Name: "e.ndjson", Size: 50, ModTime: t0.Add(-1 * day)},
	}
	for _, c := range []struct {
		name string
		p    Policy
		del  []string
		next time.Time
	}{
		{"defaults: by age", Policy{}, []string{"a.ndjson.1", "a.ndjson"}, t0.Add(12 * day)},
		{"by age then size", Policy{MaxBytes: 400, MaxAge: 10 * day}, []string{"a.ndjson.1", "a.ndjson", "c.ndjson"}, t0.Add(9 * day)},
		{"size, ties by name", Policy{MaxBytes: 350, MaxAge: -1}, []string{"a.ndjson.1", "a.ndjson", "c.ndjson", "d.ndjson"}, time.Time{}},
		{"only in use left", Policy{MaxBytes: 1, MaxAge: -1}, []string{"a.ndjson.1", "a.ndjson", "c.ndjson", "d.ndjson", "e.ndjson"}, time.Time{}},
		{"no bounds", Policy{MaxBytes: -1, MaxAge: -1}, nil, time.Time{}},
		{"age exactly reached", Policy{MaxAge: 15 * day, MaxBytes: -1}, []string{"a.ndjson.1", "a.ndjson"}, t0.Add(13 * day)},
	} {
		t.Run(c.name, func(t *testing.T) {
			del, next := Select(files, t0, c.p)
			if diff := cmp.Diff(c.del, del); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if !next.Equal(c.next) {
				t.Errorf("next %v, want %v", next, c.next)
			}
		})
	}
}

func TestSession(t *testing.T) {
	got := map[string]string{}
	for _, n := range []string{"ses_1.ndjson", "ses_1.ndjson.1", "ses_2.ndjson.7", "notes.txt", ".ndjson", "x"} {
		got[n] = Session(n)
	}
	want := map[string]string{"ses_1.ndjson": "ses_1", "ses_1.ndjson.1": "ses_1", "ses_2.ndjson.7": "ses_2",
		"notes.txt": "", ".ndjson": "", "x": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

// Prune deletes what Select picks, leaves what is no log and what is in
// use, and makes the logs it keeps private.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int, age time.Duration, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", size)), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, t0.Add(-age), t0.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	write("old.ndjson.1", 10, 30*24*time.Hour, 0o600)
	write("old.ndjson", 20, 20*24*time.Hour, 0o600)
	write("live.ndjson", 40, 40*24*time.Hour, 0o644)
	write("new.ndjson", 30, time.Hour, 0o644)
	write("README", 5, 90*24*time.Hour, 0o644)
	if err := os.Mkdir(filepath.Join(dir, "sub.ndjson"), 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := Prune(dir, t0, Policy{}, func(s string) bool { return s == "live" })
	if err != nil {
		t.Fatal(err)
	}
	want := Pruned{Deleted: []string{"old.ndjson.1", "old.ndjson"}, Bytes: 30, Next: t0.Add(14*24*time.Hour - time.Hour)}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("pruned (-want +got):\n%s", diff)
	}
	left := map[string]os.FileMode{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		fi, _ := e.Info()
		left[e.Name()] = fi.Mode()
	}
	wantLeft := map[string]os.FileMode{"live.ndjson": 0o600, "new.ndjson": 0o600, "README": 0o644, "sub.ndjson": os.ModeDir | 0o700}
	if diff := cmp.Diff(wantLeft, left); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
	if _, err := Prune(filepath.Join(dir, "nope"), t0, Policy{}, func(string) bool { return false }); err == nil ||
		!strings.Contains(err.Error(), "prune raw-frame logs") {
		t.Errorf("a missing dir: %v", err)
	}
}

// A log that cannot be deleted is named in the error, and the rest are
// still pruned.
func TestPruneGoesOnPastAFailure(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root deletes from a read-only directory")
	}
	dir := t.TempDir()
	for _, n := range []string{"a.ndjson", "b.ndjson"} {
		p := filepath.Join(dir, n)
		os.WriteFile(p, []byte("x"), 0o600)
		os.Chtimes(p, t0.Add(-30*24*time.Hour), t0.Add(-30*24*time.Hour))
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	r, err := Prune(dir, t0, Policy{}, func(string) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "a.ndjson") || !strings.Contains(err.Error(), "b.ndjson") {
		t.Errorf("error %v; want one naming a.ndjson and b.ndjson", err)
	}
	if diff := cmp.Diff(Pruned{}, r); diff != "" {
		t.Errorf("pruned (-want +got):\n%s", diff)
	}
}

func TestParseAndFormat(t *testing.T) {
	sizes := map[string]int64{"256MiB": 256 << 20, "1G": 1 << 30, "2.5GB": 2_500_000_000, "1048576": 1 << 20,
		"10 kib": 10 << 10, "none": -1, "NONE": -1, "3b": 3, "1TiB": 1 << 40}
	for in, want := range sizes {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "12 parsecs", "MiB", "0.1", "99999999TiB"} {
		if got, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d; want an error", bad, got)
		}
	}
	ages := map[string]time.Duration{"14d": 14 * 24 * time.Hour, "36h": 36 * time.Hour, "1.5d": 36 * time.Hour,
		"90m": 90 * time.Minute, "none": -1}
	for in, want := range ages {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "0d", "-3h", "soon", "xd", "1e300d"} {
		if got, err := ParseAge(bad); err == nil {
			t.Errorf("ParseAge(%q) = %v; want an error", bad, got)
		}
	}
	formats := map[string]string{FormatSize(256 << 20): "256MiB", FormatSize(1 << 30): "1GiB", FormatSize(1000): "1000",
		FormatSize(3 << 10): "3KiB", FormatSize(-1): "none", FormatAge(14 * 24 * time.Hour): "14d", FormatAge(36 * time.Hour): "36h0m0s",
		FormatAge(-1): "none"}
	for got, want := range formats {
		if got != want {
			t.Errorf("formatted %q, want %q", got, want)
		}
	}
	for _, n := range []int64{1, 1000, 1 << 20, 5 << 40, 123456789} {
		if got, err := ParseSize(FormatSize(n)); err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, got, err)
		}
	}
}
