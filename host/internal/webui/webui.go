// Package webui holds the dashboard's built files, embedded in the baton
// binary.
//
// The files are built from web/ (TypeScript, Preact) by `make web`, which
// `make generate` runs, into dist/: index.html, app.js and app.css. They
// are committed, so building baton needs no Node. The Go side knows
// nothing of the framework: the service (service.Config.Pages) serves a
// file of FS to a GET of its path, and index.html to any other GET path;
// the page's script reads the path (/, /threads/ID, /plugins) and shows
// that page.
package webui

import (
	"embed"
	"fmt"
	"io/fs"
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
