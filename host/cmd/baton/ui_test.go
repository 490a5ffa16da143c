package main

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// baton ui prints a sign-in link (stdout: the link alone, for a script or
// a terminal's click) that a browser opens once for a session cookie; with
// a thread, the link opens its page. Against a service with only its
// socket it says which flag to give, and with no service, that one must
// run.
func TestUI(t *testing.T) {
	data := privateDir(t)
	sock := filepath.Join(data, "baton.sock")
	out, errOut, code := baton(t, "ui", "--no-open", "--data", data)
	if want := "baton: no service answers on " + sock + ": the dashboard is the service's; start one with baton serve --listen tcp://127.0.0.1:7077\n"; code != exitFailed || out != "" || errOut != want {
		t.Errorf("ui with no service: %d %q %q; want %q", code, out, errOut, want)
	}

	s := startService(t, data, "--listen", "tcp://127.0.0.1:0")
	c := s.client()
	id := createThread(t, c, "acp/simple.ndjson", "decline")
	link := regexp.MustCompile(`^http://127\.0\.0\.1:\d+/login\?code=[0-9a-f]{64}\n$`)
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ args, to string }{{"", "/"}, {id, "/threads/" + id}} {
		args := []string{"ui", "--no-open", "--data", data}
		if tc.args != "" {
			args = append(args, tc.args)
		}
		out, errOut, code := baton(t, args...)
		if code != exitOK || !link.MatchString(out) || !strings.HasPrefix(errOut, "baton: the link signs one browser in, once, until ") {
			t.Fatalf("ui %s: %d %q %q", tc.args, code, out, errOut)
		}
		resp, err := browser.Get(strings.TrimSpace(out))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := []any{resp.StatusCode, resp.Header.Get("Location"), len(resp.Cookies())}; !cmp.Equal(got, []any{http.StatusSeeOther, tc.to, 1}) {
			t.Errorf("open the link of ui %s: %v, want 303 to %s with a cookie", tc.args, got, tc.to)
		}
	}
	if _, errOut, code := baton(t, "ui", "--no-open", "--data", data, "thrNOPE"); code != exitUsage || errOut != "baton: not found: thread \"thrNOPE\"\n" {
		t.Errorf("ui for no thread: %d %q", code, errOut)
	}

	socketOnly := privateDir(t)
	startService(t, socketOnly)
	_, errOut, code = baton(t, "ui", "--no-open", "--data", socketOnly)
	if !strings.Contains(errOut, "start it with --listen tcp://127.0.0.1:7077") || code != exitFailed {
		t.Errorf("ui against a socket-only service: %d %q; want the flag to give", code, errOut)
	}
}
