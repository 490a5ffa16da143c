package webui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/webui"
)

func get(t *testing.T, h http.Handler, method, target string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("read the body: %v", err)
	}
	return string(b)
}

func TestHandlerServesTheBuiltFiles(t *testing.T) {
	h := webui.Handler()
	for _, tc := range []struct{ path, contentType string }{
		{"/app.js", "text/javascript"},
		{"/app.css", "text/css"},
		{"/index.html", "text/html"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := get(t, h, http.MethodGet, tc.path)
			if r.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: status %d, want 200", tc.path, r.StatusCode)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.contentType)
			}
			want, err := fs.ReadFile(webui.FS(), strings.TrimPrefix(tc.path, "/"))
			if err != nil {
				t.Fatal(err)
			}
			if got := body(t, r); got != string(want) {
				t.Errorf("GET %s: the body is not the embedded file (%d bytes, want %d)", tc.path, len(got), len(want))
			}
		})
	}
}

// The page routes on the client: every path that is not a file is the
// page itself.
func TestHandlerServesTheIndexForEveryOtherPath(t *testing.T) {
	h := webui.Handler()
	index, err := fs.ReadFile(webui.FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/threads/01JTHREAD", "/plugins", "/no/such/file.js"} {
		r := get(t, h, http.MethodGet, p)
		if r.StatusCode != http.StatusOK || body(t, r) != string(index) {
			t.Errorf("GET %s: status %d, not index.html", p, r.StatusCode)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type %q, want text/html", p, ct)
		}
	}
}

func TestHandlerSetsTheContentSecurityPolicy(t *testing.T) {
	r := get(t, webui.Handler(), http.MethodGet, "/threads/x")
	if got := r.Header.Get("Content-Security-Policy"); got != webui.ContentSecurityPolicy {
		t.Errorf("Content-Security-Policy %q, want %q", got, webui.ContentSecurityPolicy)
	}
	if !strings.Contains(webui.ContentSecurityPolicy, "script-src 'self'") ||
		strings.Contains(webui.ContentSecurityPolicy, "unsafe-inline") {
		t.Errorf("the policy must allow only the page's own scripts: %s", webui.ContentSecurityPolicy)
	}
}

func TestHandlerRevalidatesWithTheETag(t *testing.T) {
	h := webui.Handler()
	first := get(t, h, http.MethodGet, "/app.js")
	etag := first.Header.Get("ETag")
	if etag == "" {
		t.Fatal("GET /app.js: no ETag")
	}
	req := httptest.NewRequest(http.MethodGet, "/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("GET /app.js with its ETag: status %d, want 304", rec.Code)
	}
}

func TestHandlerRefusesOtherMethods(t *testing.T) {
	r := get(t, webui.Handler(), http.MethodPost, "/")
	if r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", r.StatusCode)
	}
	if got := r.Header.Get("Allow"); got != "GET, HEAD" {
		t.Errorf("POST /: Allow %q, want GET, HEAD", got)
	}
}

// The page works offline: index.html loads only the page's own files, and
// those are in the binary.
func TestIndexLoadsOnlyEmbeddedFiles(t *testing.T) {
	index, err := fs.ReadFile(webui.FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(index), -1)
	if len(refs) == 0 {
		t.Fatal("index.html loads nothing")
	}
	for _, m := range refs {
		ref := m[1]
		if strings.HasPrefix(ref, "data:") {
			continue
		}
		if !strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "//") {
			t.Errorf("index.html loads %q: not a path on the page's own origin", ref)
			continue
		}
		if _, err := fs.Stat(webui.FS(), strings.TrimPrefix(ref, "/")); err != nil {
			t.Errorf("index.html loads %q, which is not embedded: %v", ref, err)
		}
	}
}
