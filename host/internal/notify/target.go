package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/baton-run/baton/host/internal/domain"
)

// Target is a webhook: the URL notices are POSTed to, and the notice
// types it takes (every type, when Events is empty).
type Target struct {
	URL    string              `json:"url"`
	Events []domain.NoticeType `json:"events,omitempty"`
}

// Wants says whether the target takes notices of a type.
func (t Target) Wants(typ domain.NoticeType) bool {
	return len(t.Events) == 0 || slices.Contains(t.Events, typ)
}

// maxURL bounds a target's URL: it is part of the event log's keys.
const maxURL = 2048

// CheckURL refuses a URL that is not an absolute http or https URL with
// a host, or that holds control characters or spaces.
func CheckURL(raw string) error {
	if len(raw) > maxURL {
		return fmt.Errorf("webhook URL is %d bytes long, more than %d", len(raw), maxURL)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return fmt.Errorf("webhook URL %q holds a space or a control character", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("webhook URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("webhook URL %q is not http:// or https://", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("webhook URL %q names no host", raw)
	}
	return nil
}

// ParseEvents reads notice type names (request.pending, run.ended,
// wait.started, wait.ended); none means every type.
func ParseEvents(names []string) ([]domain.NoticeType, error) {
	var out []domain.NoticeType
	for _, n := range names {
		typ := domain.NoticeType(strings.TrimSpace(n))
		if !slices.Contains(domain.NoticeTypes, typ) {
			return nil, fmt.Errorf("unknown event %q: the events are %s", n, eventNames())
		}
		if !slices.Contains(out, typ) {
			out = append(out, typ)
		}
	}
	return out, nil
}

// eventNames lists the notice types, comma-separated.
func eventNames() string {
	names := make([]string, len(domain.NoticeTypes))
	for i, t := range domain.NoticeTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// FileName is the file in the data dir that holds the targets `baton
// notify add` gave (0600): `baton serve` reads it as it starts.
const FileName = "notify.json"

// file is FileName's content.
type file struct {
	Targets []Target `json:"targets"`
}

// LoadTargets reads the data dir's targets (none when it has no file).
func LoadTargets(dataDir string) ([]Target, error) {
	path := filepath.Join(dataDir, FileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read webhook targets: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("read webhook targets %s: %w", path, err)
	}
	for _, t := range f.Targets {
		if err := CheckURL(t.URL); err != nil {
			return nil, fmt.Errorf("read webhook targets %s: %w", path, err)
		}
	}
	return f.Targets, nil
}

// SaveTargets writes the data dir's targets (0600), replacing the file in
// one rename so that a reader sees the old list or the new one.
func SaveTargets(dataDir string, targets []Target) error {
	b, _ := json.MarshalIndent(file{Targets: targets}, "", "  ") // targets always encode
	path := filepath.Join(dataDir, FileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write webhook targets: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write webhook targets: %w", err)
	}
	return nil
}

// Merge is the targets of a service: those of the command line (every
// event) and those of the data dir's file, each URL once (the command
// line's first).
func Merge(urls []string, saved []Target) []Target {
	var out []Target
	seen := map[string]bool{}
	add := func(t Target) {
		if !seen[t.URL] {
			seen[t.URL] = true
			out = append(out, t)
		}
	}
	for _, u := range urls {
		add(Target{URL: u})
	}
	for _, t := range saved {
		add(t)
	}
	return out
}
