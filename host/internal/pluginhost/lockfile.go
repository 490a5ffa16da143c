package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// LockfileName is the file, in a plugin directory, that records the SHA-256
// of every plugin binary there. A binary whose hash differs is refused.
const LockfileName = "plugins.lock"

// BinaryPrefix starts every plugin executable's name: baton-plugin-<name>.
const BinaryPrefix = "baton-plugin-"

// Lockfile is the JSON form of plugins.lock.
type Lockfile struct {
	Version int                  `json:"version"`
	Plugins map[string]LockEntry `json:"plugins"`
}

// LockEntry is one plugin's record.
type LockEntry struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// ReadLockfile reads dir's lockfile; a missing one is empty.
func ReadLockfile(dir string) (Lockfile, error) {
	lf := Lockfile{Version: 1, Plugins: map[string]LockEntry{}}
	b, err := os.ReadFile(filepath.Join(dir, LockfileName))
	if errors.Is(err, os.ErrNotExist) {
		return lf, nil
	}
	if err != nil {
		return lf, fmt.Errorf("read plugin lockfile: %w", err)
	}
	if err := json.Unmarshal(b, &lf); err != nil {
		return lf, fmt.Errorf("read plugin lockfile %s: %w", filepath.Join(dir, LockfileName), err)
	}
	if lf.Plugins == nil {
		lf.Plugins = map[string]LockEntry{}
	}
	return lf, nil
}

func writeLockfile(dir string, lf Lockfile) error {
	b, err := json.MarshalIndent(lf, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, LockfileName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write plugin lockfile: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, LockfileName))
}

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Lock records the SHA-256 of every plugin binary in dir (what a build or
// an install does) and returns the plugin names.
func Lock(dir string) ([]string, error) {
	lf, err := ReadLockfile(dir)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("lock plugins: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() || !strings.HasPrefix(e.Name(), BinaryPrefix) {
			continue
		}
		sum, err := FileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("lock plugins: %w", err)
		}
		name := strings.TrimPrefix(e.Name(), BinaryPrefix)
		lf.Plugins[name] = LockEntry{File: e.Name(), SHA256: sum}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, writeLockfile(dir, lf)
}

// Install copies a plugin binary into dir as baton-plugin-<name> and records
// its checksum.
func Install(src, dir, name string) error {
	if name == "" || strings.ContainsAny(name, "/\\ ") {
		return fmt.Errorf("install plugin: bad name %q", name)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install plugin: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install plugin: %w", err)
	}
	dst := filepath.Join(dir, BinaryPrefix+name)
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("install plugin: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("install plugin: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("install plugin: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("install plugin: %w", err)
	}
	sum, err := FileSHA256(dst)
	if err != nil {
		return err
	}
	lf, err := ReadLockfile(dir)
	if err != nil {
		return err
	}
	lf.Plugins[name] = LockEntry{File: BinaryPrefix + name, SHA256: sum}
	return writeLockfile(dir, lf)
}
