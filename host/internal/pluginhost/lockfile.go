package pluginhost

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

// LockEntry is one plugin's record, under its name. File and SHA256 are
// all a lockfile written before installs from modules has; the rest is
// what the plugin said of itself when it was installed (or locked).
type LockEntry struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Source is where the binary came from: "file:PATH" (installed or
	// locked from a file) or "PACKAGE@VERSION" (built with go install).
	Source string `json:"source,omitempty"`
	// Protocol is the plugin protocol version it spoke at install.
	Protocol int `json:"protocol,omitempty"`
	// Version and SDKVersion are the plugin's Describe().Version and
	// Describe().SDKVersion.
	Version    string `json:"version,omitempty"`
	SDKVersion string `json:"sdkVersion,omitempty"`
	// Capabilities are the capabilities it declared (CapabilityNames).
	Capabilities []string `json:"capabilities,omitempty"`
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
	// The lockfile is as readable as its directory: private in the data
	// dir's plugins directory (0700), readable by all beside a baton
	// installed for all (0755).
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(dir); err == nil {
		mode = fi.Mode().Perm() & 0o644
	}
	tmp := filepath.Join(dir, "."+LockfileName+".tmp")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) { // a stale one would keep its mode
		return fmt.Errorf("write plugin lockfile: %w", err)
	}
	if err := os.WriteFile(tmp, append(b, '\n'), mode); err != nil {
		return fmt.Errorf("write plugin lockfile: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, LockfileName)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write plugin lockfile: %w", err)
	}
	return nil
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
// an install does) and returns the plugin names. A binary that is
// unchanged keeps its record; another gets a new one whose source is the
// file itself. Lock does not start the binaries (Install does).
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
		src, err := filepath.Abs(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("lock plugins: %w", err)
		}
		if old, ok := lf.Plugins[name]; ok && old.File == e.Name() && old.SHA256 == sum {
			// Unchanged: its record stays (a module's source with it); a
			// record from before sources were kept gets the file's.
			old.Source = cmp.Or(old.Source, "file:"+src)
			lf.Plugins[name] = old
			names = append(names, name)
			continue
		}
		lf.Plugins[name] = LockEntry{File: e.Name(), SHA256: sum, Source: "file:" + src}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, writeLockfile(dir, lf)
}

// Install copies a plugin binary into dir as baton-plugin-<name> and records
// its checksum and source, without starting it (InstallFile does: it is
// what `baton plugin install` runs).
func Install(src, dir, name string) error {
	if err := CheckName(name); err != nil {
		return fmt.Errorf("install plugin: %w", err)
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return fmt.Errorf("install plugin: %w", err)
	}
	tmp, sum, err := copyIn(abs, dir, name)
	if err != nil {
		return err
	}
	return commit(dir, name, tmp, LockEntry{SHA256: sum, Source: "file:" + abs})
}

// copyIn copies a binary into dir (made, private, if missing) under a
// temporary name, mode 0700, and hashes the copy.
func copyIn(src, dir, name string) (tmp, sum string, err error) {
	in, err := os.Open(src)
	if err != nil {
		return "", "", fmt.Errorf("install plugin %s: %w", name, err)
	}
	defer in.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("install plugin %s: %w", name, err)
	}
	if err := checkMode(dir, "plugin directory", dir); err != nil {
		return "", "", fmt.Errorf("install plugin %s: %w", name, err)
	}
	out, err := os.CreateTemp(dir, ".install-"+name+"-")
	if err != nil {
		return "", "", fmt.Errorf("install plugin %s: %w", name, err)
	}
	tmp = out.Name()
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Chmod(0o700)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", "", fmt.Errorf("install plugin %s: %w", name, err)
	}
	return tmp, hex.EncodeToString(h.Sum(nil)), nil
}

// commit moves a copied binary into place as name's and records e for it
// (the old binary, if any, is replaced in one rename).
func commit(dir, name, tmp string, e LockEntry) error {
	e.File = BinaryPrefix + name
	lf, err := ReadLockfile(dir)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, e.File)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("install plugin %s: %w", name, err)
	}
	lf.Plugins[name] = e
	return writeLockfile(dir, lf)
}
