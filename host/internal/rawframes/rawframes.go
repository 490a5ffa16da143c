// Package rawframes bounds the raw-frame logs the host asks plugins to
// keep (DATA/rawframes/SESSION.ndjson, and the older .ndjson.1 a plugin's
// framelog rotates to): full prompts and answers, kept for diagnosis.
//
// Retention is by age and by the directory's total size. A log older than
// MaxAge (by its modification time: when it was last written) is deleted;
// then, while the logs together take more than MaxBytes, the oldest is
// deleted, a whole file at a time. The logs of a session a plugin may
// still write are never deleted: they count toward MaxBytes, and the
// closed sessions' logs go first. A session's own size is the plugin's
// bound (framelog: 2 x 8 MiB), so the directory holds at most MaxBytes
// plus that much per session open at once.
//
// Select is the rule, pure; Prune applies it to a directory.
package rawframes

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of a zero Policy.
const (
	DefaultMaxBytes = 256 << 20
	DefaultMaxAge   = 14 * 24 * time.Hour
)

// Policy says whether raw frames are kept and for how long. The zero value
// keeps them, within the defaults.
type Policy struct {
	// Off keeps no raw frames: plugins are given no log, and only number
	// the frames. Logs already kept are still pruned.
	Off bool
	// MaxBytes bounds the logs' total size (0: DefaultMaxBytes; negative:
	// no bound).
	MaxBytes int64
	// MaxAge bounds how long a log is kept after it was last written (0:
	// DefaultMaxAge; negative: no bound).
	MaxAge time.Duration
}

// Limits are the policy's bounds with the defaults filled in: 0 where a
// bound is off.
func (p Policy) Limits() (maxBytes int64, maxAge time.Duration) {
	maxBytes, maxAge = p.MaxBytes, p.MaxAge
	switch {
	case maxBytes == 0:
		maxBytes = DefaultMaxBytes
	case maxBytes < 0:
		maxBytes = 0
	}
	switch {
	case maxAge == 0:
		maxAge = DefaultMaxAge
	case maxAge < 0:
		maxAge = 0
	}
	return maxBytes, maxAge
}

// File is a raw-frame log as Select sees it.
type File struct {
	Name    string
	Size    int64
	ModTime time.Time
	// InUse: its session may still be written (never deleted).
	InUse bool
}

// Session is the session a log file belongs to: its name up to ".ndjson"
// (SESSION.ndjson, SESSION.ndjson.1), or "" for a file that is no log.
func Session(name string) string {
	i := strings.Index(name, ".ndjson")
	if i <= 0 {
		return ""
	}
	return name[:i]
}

// Select is the retention rule: the names of the files to delete at now,
// oldest first, and the instant the next of the kept files comes of age
// (zero: none will, as things stand). Files are taken oldest first (by
// ModTime, then name); a file in use is never deleted.
func Select(files []File, now time.Time, p Policy) (del []string, next time.Time) {
	maxBytes, maxAge := p.Limits()
	fs := slices.Clone(files)
	slices.SortFunc(fs, func(a, b File) int {
		if c := a.ModTime.Compare(b.ModTime); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var total int64
	for _, f := range fs {
		total += f.Size
	}
	gone := make([]bool, len(fs))
	for i, f := range fs {
		if !f.InUse && maxAge > 0 && now.Sub(f.ModTime) >= maxAge {
			gone[i], total = true, total-f.Size
		}
	}
	for i, f := range fs {
		if maxBytes <= 0 || total <= maxBytes {
			break
		}
		if !gone[i] && !f.InUse {
			gone[i], total = true, total-f.Size
		}
	}
	for i, f := range fs {
		switch {
		case gone[i]:
			del = append(del, f.Name)
		case !f.InUse && maxAge > 0:
			if at := f.ModTime.Add(maxAge); next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return del, next
}

// Pruned is what a Prune did.
type Pruned struct {
	Deleted []string // the files deleted, oldest first
	Bytes   int64    // their size
	Next    time.Time
}

// Prune applies the policy to dir at now: it deletes what Select picks
// (inUse says which sessions' logs may still be written) and makes the
// logs it keeps 0600. Files whose names are no log's are left alone. It
// goes on past a file it cannot delete or chmod; the error names each.
func Prune(dir string, now time.Time, p Policy, inUse func(session string) bool) (Pruned, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Pruned{}, fmt.Errorf("prune raw-frame logs: %w", err)
	}
	var files []File
	sizes := map[string]int64{}
	var errs []error
	for _, e := range ents {
		s := Session(e.Name())
		if s == "" || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("prune raw-frame logs: %w", err))
			continue
		}
		files = append(files, File{Name: e.Name(), Size: fi.Size(), ModTime: fi.ModTime()})
		sizes[e.Name()] = fi.Size()
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("prune raw-frame logs: make %s private: %w", e.Name(), err))
			}
		}
	}
	// In use is asked after the listing: a session that opens meanwhile
	// has no file in it, and one that closes meanwhile is kept this time.
	for i := range files {
		files[i].InUse = inUse(Session(files[i].Name))
	}
	del, next := Select(files, now, p)
	out := Pruned{Next: next}
	for _, name := range del {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("prune raw-frame logs: %w", err))
			continue
		}
		out.Deleted = append(out.Deleted, name)
		out.Bytes += sizes[name]
	}
	return out, errors.Join(errs...)
}

// Units of sizes: binary with an i or alone (KiB, K), decimal without.
var units = map[string]float64{"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12}

// None is the word for no bound in ParseSize and ParseAge.
const None = "none"

// ParseSize reads a size bound: a positive number of bytes with an
// optional unit (512MiB, 1G, 2.5GB, 1048576), or "none" (-1: no bound).
func ParseSize(s string) (int64, error) {
	if strings.EqualFold(s, None) {
		return -1, nil
	}
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	n, err := strconv.ParseFloat(t[:i], 64)
	unit, ok := units[strings.ToLower(strings.TrimSpace(t[i:]))]
	if err != nil || !ok {
		return 0, fmt.Errorf("%q is not a size: give bytes with a unit, like 256MiB or 1GiB, or %s", s, None)
	}
	b := n * unit
	if b < 1 || b > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q out of range: give at least 1 byte, or %s", s, None)
	}
	return int64(b), nil
}

// ParseAge reads an age bound: a positive duration (36h, 90m) or a number
// of days (14d), or "none" (-1: no bound).
func ParseAge(s string) (time.Duration, error) {
	if strings.EqualFold(s, None) {
		return -1, nil
	}
	t := strings.TrimSpace(s)
	var d time.Duration
	if days, ok := strings.CutSuffix(t, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n > float64(math.MaxInt64/int64(24*time.Hour)) {
			return 0, fmt.Errorf("%q is not an age: give days (14d), a duration (36h), or %s", s, None)
		}
		d = time.Duration(n * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(t); err != nil {
			return 0, fmt.Errorf("%q is not an age: give days (14d), a duration (36h), or %s", s, None)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("age %q out of range: give more than 0, or %s", s, None)
	}
	return d, nil
}

// FormatSize writes a size bound as ParseSize reads it.
func FormatSize(n int64) string {
	if n < 0 {
		return None
	}
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// FormatAge writes an age bound as ParseAge reads it.
func FormatAge(d time.Duration) string {
	if d < 0 {
		return None
	}
	if day := 24 * time.Hour; d >= day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}
