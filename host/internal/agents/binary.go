package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// maxArchiveSize is the most of an archive downloaded: the largest agent
// archive in the registry is about a hundred megabytes; ten times that
// is room to grow, and a bound on a server that never stops sending.
const maxArchiveSize = 1 << 30

// installBinary downloads the platform's archive beside staging, checks
// its SHA-256 when the registry gives one, and extracts it into staging.
func installBinary(ctx context.Context, client *http.Client, staging string, t BinaryTarget) (staged, error) {
	cmd, err := localPath(t.Cmd)
	if err == nil && cmd == "" {
		err = errors.New("it names the directory")
	}
	if err != nil {
		return staged{}, fmt.Errorf("the registry's command %q: %w", t.Cmd, err)
	}
	u, err := url.Parse(t.Archive)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return staged{}, fmt.Errorf("archive %q is not an http or https URL", t.Archive)
	}
	format, err := formatOf(u.Path)
	if err != nil {
		return staged{}, fmt.Errorf("archive %s: %w", t.Archive, err)
	}

	f, err := os.CreateTemp(filepath.Dir(staging), filepath.Base(staging)+".download-*")
	if err != nil {
		return staged{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	sum, size, err := download(ctx, client, t.Archive, f)
	if err != nil {
		return staged{}, err
	}
	if t.SHA256 != "" && !strings.EqualFold(sum, t.SHA256) {
		return staged{}, fmt.Errorf("archive %s: its SHA-256 is %s, but the registry says %s: refused", t.Archive, sum, t.SHA256)
	}
	if err := extract(f, size, format, staging, cmd); err != nil {
		return staged{}, fmt.Errorf("archive %s: %w", t.Archive, err)
	}
	return staged{cmd: cmd, args: t.Args, env: t.Env, source: t.Archive, sha256: sum}, nil
}

// download writes a URL's body to f and returns its SHA-256 and size.
func download(ctx context.Context, client *http.Client, rawURL string, f *os.File) (sum string, size int64, err error) {
	resp, err := open(ctx, client, rawURL)
	if err != nil {
		return "", 0, fmt.Errorf("download archive: %w", err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, maxArchiveSize+1))
	if err != nil {
		return "", 0, fmt.Errorf("download archive %s: %w", rawURL, err)
	}
	if size > maxArchiveSize {
		return "", 0, fmt.Errorf("download archive: %w", &tooLargeError{what: rawURL, limit: maxArchiveSize})
	}
	if err := f.Sync(); err != nil {
		return "", 0, fmt.Errorf("download archive %s: %w", rawURL, err)
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}
