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
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/pluginclient"
)

// Config says where plugins are.
type Config struct {
	// Dirs are searched in order; the first holding the plugin wins.
	Dirs   []string
	Logger hclog.Logger
	// Clock runs the wait, when a plugin is stopped, between asking it to
	// shut down and killing it (default clock.System).
	Clock clock.Clock
	// KillGrace is that wait (default sdk.DefaultKillGrace).
	KillGrace time.Duration
}

// Manager runs one process per plugin, started on first use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	running map[string]*Plugin
	closed  bool
}

// Plugin is a started plugin with its description.
type Plugin struct {
	*pluginclient.Plugin
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

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("plugin manager closed")

// Find locates a plugin binary and its recorded checksum.
func (m *Manager) Find(name string) (path string, sum []byte, err error) {
	for _, dir := range m.cfg.Dirs {
		p := filepath.Join(dir, BinaryPrefix+name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := checkInstalled(dir, name, p); err != nil {
			return "", nil, err
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

// Get returns the running plugin for a provider, starting it if needed: a
// plugin whose process has exited is started again.
func (m *Manager) Get(ctx context.Context, name string) (*Plugin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("plugin %s: %w", name, ErrClosed)
	}
	if p, ok := m.running[name]; ok {
		select {
		case <-p.Exited():
			delete(m.running, name)
			p.Kill() // the process is gone: this only releases its client
		default:
			return p, nil
		}
	}
	path, sum, err := m.Find(name)
	if err != nil {
		return nil, err
	}
	sp, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: path, Checksum: sum, Logger: m.cfg.Logger.Named(name),
		Clock: m.cfg.Clock, KillGrace: m.cfg.KillGrace})
	if err != nil {
		return nil, launchError("plugin "+name, err)
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

// Running returns the plugin's process, if the manager runs it (and it
// has not exited); it starts none.
func (m *Manager) Running(name string) (*Plugin, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.running[name]
	if !ok {
		return nil, false
	}
	select {
	case <-p.Exited():
		return nil, false
	default:
		return p, true
	}
}

// Close stops every plugin, all at once: each is asked to shut down and
// killed if it has not exited after the kill grace, so Close returns within
// about one grace even when plugins do not answer. Get fails after it.
func (m *Manager) Close() {
	m.close(func(p *Plugin) { p.Kill() })
}

// CloseNow is Close for a host that will not wait: each plugin is killed at
// once (SIGKILL), its providers dying with it, with reason.
func (m *Manager) CloseNow(reason string) {
	m.close(func(p *Plugin) { p.KillNow(reason) })
}

func (m *Manager) close(kill func(*Plugin)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	var wg sync.WaitGroup
	for _, p := range m.running {
		wg.Go(func() { kill(p) })
	}
	wg.Wait()
	clear(m.running)
}
