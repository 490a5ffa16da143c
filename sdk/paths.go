package sdk

import (
	"path/filepath"
	"strings"
)

// RelPath shows a path inside cwd relative to it, as item titles and
// details name the files a provider names by their absolute paths. A
// relative path, a path outside cwd, or an empty cwd leaves p as it is.
func RelPath(cwd, p string) string {
	if cwd == "" || !filepath.IsAbs(p) {
		return p
	}
	if rel, err := filepath.Rel(cwd, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return rel
	}
	return p
}
