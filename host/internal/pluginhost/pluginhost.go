// Package pluginhost finds, verifies and starts provider plugins. A plugin is
// an executable baton-plugin-<name> in a plugin directory whose lockfile
// records its SHA-256; go-plugin checks the hash at every start.
package pluginhost

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
)

// Config says where plugins are.
type Config struct {
	// Dirs are searched in order; the first holding the plugin wins.
	Dirs   []string
	Logger hclog.Logger
}

// Manager runs one process per plugin, started on first use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	running map[string]*Plugin
}

// Plugin is a started plugin with its description.
type Plugin struct {
	*sdk.Plugin
	Name        string
	Path        string
	Description sdk.Description
}

// New returns a manager.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Manager{cfg: cfg, running: map[string]*Plugin{}}
}

// ErrNotInstalled is returned for a provider with no plugin binary.
var ErrNotInstalled = errors.New("plugin not installed")

// Find locates a plugin binary and its recorded checksum.
func (m *Manager) Find(name string) (path string, sum []byte, err error) {
	for _, dir := range m.cfg.Dirs {
		p := filepath.Join(dir, BinaryPrefix+name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		lf, err := ReadLockfile(dir)
		if err != nil {
			return "", nil, err
		}
		e, ok := lf.Plugins[name]
		if !ok || e.File != BinaryPrefix+name {
			return "", nil, fmt.Errorf("plugin %s at %s has no checksum in %s; record it with 'baton plugin lock %s' or install it with 'baton plugin install'",
				name, p, filepath.Join(dir, LockfileName), dir)
		}
		sum, err := hex.DecodeString(e.SHA256)
		if err != nil || len(sum) != 32 {
			return "", nil, fmt.Errorf("plugin %s: bad sha256 %q in %s", name, e.SHA256, filepath.Join(dir, LockfileName))
		}
		return p, sum, nil
	}
	return "", nil, fmt.Errorf("%w: no %s%s in %v", ErrNotInstalled, BinaryPrefix, name, m.cfg.Dirs)
}

// Installed lists the plugins in the search path by name, sorted; a name
// in several directories is the first directory's.
func (m *Manager) Installed() []string {
	seen := map[string]bool{}
	var names []string
	for _, dir := range m.cfg.Dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // a directory that does not exist has no plugins
		}
		for _, e := range entries {
			name, ok := strings.CutPrefix(e.Name(), BinaryPrefix)
			if !ok || name == "" || e.IsDir() || seen[name] {
				continue
			}
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Get returns the running plugin for a provider, starting it if needed.
func (m *Manager) Get(ctx context.Context, name string) (*Plugin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.running[name]; ok {
		select {
		case <-p.Exited():
			delete(m.running, name)
		default:
			return p, nil
		}
	}
	path, sum, err := m.Find(name)
	if err != nil {
		return nil, err
	}
	sp, err := sdk.Launch(sdk.LaunchConfig{Path: path, Checksum: sum, Logger: m.cfg.Logger.Named(name)})
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", name, err)
	}
	d, err := sp.Describe(ctx)
	if err != nil {
		sp.Kill()
		return nil, fmt.Errorf("plugin %s: describe: %w", name, err)
	}
	p := &Plugin{Plugin: sp, Name: name, Path: path, Description: d}
	m.running[name] = p
	return p, nil
}

// Close stops every plugin.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, p := range m.running {
		p.Kill()
		delete(m.running, name)
	}
}
