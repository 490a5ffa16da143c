package notify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-run/baton/host/internal/domain"
)

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080/hook", "https://hooks.example/baton?x=1"} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v", ok, err)
		}
	}
	for bad, says := range map[string]string{
		"ftp://x/y":     "not http:// or https://",
		"http:///path":  "names no host",
		"/relative":     "not http:// or https://",
		"http://x/a b":  "a space or a control character",
		"http://x/\x00": "a space or a control character",
		"http://x/" + strings.Repeat("a", maxURL): "more than 2048",
		"http://[::1": "webhook URL: parse",
	} {
		if err := CheckURL(bad); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("CheckURL(%q) = %v, want an error saying %q", bad, err, says)
		}
	}
}

func TestParseEvents(t *testing.T) {
	got, err := ParseEvents([]string{"run.ended", " request.pending", "run.ended"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]domain.NoticeType{domain.NoticeRunEnded, domain.NoticeRequestPending}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if _, err := ParseEvents([]string{"run.done"}); err == nil || err.Error() != `unknown event "run.done": the events are request.pending, run.ended, wait.started, wait.ended` {
		t.Errorf("ParseEvents(run.done) = %v", err)
	}
	tg := Target{URL: "http://x", Events: got}
	if !tg.Wants(domain.NoticeRunEnded) || tg.Wants(domain.NoticeWaitStarted) || !(Target{URL: "http://x"}).Wants(domain.NoticeWaitEnded) {
		t.Error("Wants does not follow Events")
	}
}

// The targets file: none at first, written 0600, read back; a service's
// targets are its command line's and the file's, each URL once.
func TestTargetsFile(t *testing.T) {
	dir := t.TempDir()
	if got, err := LoadTargets(dir); err != nil || got != nil {
		t.Fatalf("no file: %v, %v", got, err)
	}
	saved := []Target{{URL: "http://127.0.0.1:1/a", Events: []domain.NoticeType{domain.NoticeRunEnded}}, {URL: "http://127.0.0.1:1/b"}}
	if err := SaveTargets(dir, saved); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v, %v", info, err)
	}
	got, err := LoadTargets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(saved, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	merged := Merge([]string{"http://127.0.0.1:1/b", "http://127.0.0.1:1/c"}, got)
	want := []Target{{URL: "http://127.0.0.1:1/b"}, {URL: "http://127.0.0.1:1/c"}, saved[0]}
	if diff := cmp.Diff(want, merged); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	for content, says := range map[string]string{"{": "unexpected end", `{"targets":[{"url":"ftp://x"}]}`: "not http"} {
		os.WriteFile(filepath.Join(dir, FileName), []byte(content), 0o600)
		if _, err := LoadTargets(dir); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("LoadTargets of %q = %v", content, err)
		}
	}
	os.Remove(filepath.Join(dir, FileName))
	os.Mkdir(filepath.Join(dir, FileName), 0o700)
	if _, err := LoadTargets(dir); err == nil {
		t.Error("a directory in the file's place was read")
	}
	if err := SaveTargets(filepath.Join(dir, "none"), saved); err == nil {
		t.Error("saved into a missing dir")
	}
}

// The secret file must be its owner's alone; the error says the fix.
func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	os.WriteFile(path, []byte("  s3cret\n"), 0o644)
	if _, err := ReadSecret(path); err == nil || !strings.Contains(err.Error(), "is mode 0644") || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Errorf("a 0644 secret: %v", err)
	}
	os.Chmod(path, 0o600)
	if got, err := ReadSecret(path); err != nil || string(got) != "s3cret" {
		t.Errorf("ReadSecret = %q, %v", got, err)
	}
	os.WriteFile(path, []byte("\n"), 0o600)
	if _, err := ReadSecret(path); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty secret: %v", err)
	}
	if _, err := ReadSecret(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing secret file was read")
	}
	os.Chmod(path, 0o200)
	if _, err := ReadSecret(path); err == nil && os.Getuid() != 0 {
		t.Error("an unreadable secret file was read")
	}
}
