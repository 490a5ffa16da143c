// Package webui holds the dashboard's built files, embedded in the baton
// binary, and the handler that serves them to a browser.
//
// The files are built from web/ (TypeScript, Preact) by `make web`, which
// `make generate` runs, into dist/: index.html, app.js and app.css. They
// are committed, so building baton needs no Node. The Go side knows
// nothing of the framework: a GET of a file serves it, and any other GET
// path serves index.html, whose script reads the path (/, /threads/ID,
// /plugins) and shows that page.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// FS returns the built files: index.html, app.js and app.css at its top.
func FS() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(fmt.Sprintf("webui: the embedded dist folder: %v", err)) // cannot happen: dist is embedded
	}
	return sub
}

// ContentSecurityPolicy lets the page load its own script and style sheet
// and call its own origin, and nothing else: no inline script, no other
// origin, no framing.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// file is one built file, read once.
type file struct {
	name string
	body []byte
	etag string
}

// Handler serves the dashboard: a GET (or HEAD) of a built file serves it,
// any other GET path serves index.html; other methods are refused (405).
// Every answer carries ContentSecurityPolicy. Authentication is the
// caller's: wrap it in what checks the session.
func Handler() http.Handler {
	files := map[string]file{}
	root := FS()
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files["/"+p] = file{name: path.Base(p), body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("webui: read the embedded files: %v", err)) // cannot happen: they are embedded
	}
	index, ok := files["/index.html"]
	if !ok {
		panic("webui: the embedded dist has no index.html") // make web writes it
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		f, ok := files[r.URL.Path]
		if !ok || strings.HasSuffix(r.URL.Path, "/index.html") {
			f = index
		}
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The names never change, so the browser asks again each time and
		// gets 304 Not Modified while the binary is the same.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
	})
}
