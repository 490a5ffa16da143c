package webui_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-run/baton/host/internal/webui"
)

// The page the service serves for every path that is not a file.
func TestFSHoldsThePage(t *testing.T) {
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		fi, err := fs.Stat(webui.FS(), name)
		if err != nil {
			t.Fatalf("the dashboard has no %s (make web builds it): %v", name, err)
		}
		if fi.Size() == 0 {
			t.Errorf("the dashboard's %s is empty", name)
		}
	}
}

// The page works offline and under a Content-Security-Policy of 'self':
// index.html loads only the page's own files, those are in the binary, and
// it has no inline script.
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
	for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(string(index), -1) {
		if !strings.Contains(m, "src=") {
			t.Errorf("index.html has an inline script (%s): the page's policy refuses it", m)
		}
	}
}

// The built script loads nothing from another origin: no address but the
// page's own is in it.
func TestScriptCallsOnlyItsOwnOrigin(t *testing.T) {
	js, err := fs.ReadFile(webui.FS(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`https?://[a-zA-Z0-9.-]+`).FindAllString(string(js), -1) {
		switch m {
		case "http://www.w3.org": // SVG and MathML namespaces in Preact
			continue
		}
		t.Errorf("app.js names %s: the page must call only its own origin", m)
	}
}
