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
	// Clock runs the plugins' timers: the deadline of Describe as a
	// plugin starts, and the wait, when a plugin is stopped, between
	// asking it to shut down and killing it (default clock.System).
	Clock clock.Clock
	// KillGrace is that wait (default sdk.DefaultKillGrace).
	KillGrace time.Duration
	// CallTimeout bounds, on Clock, the manager's own call into a plugin:
	// Describe, as the plugin starts. A plugin that does not answer in
	// time is killed (default DefaultCallTimeout).
	CallTimeout time.Duration
}

// DefaultCallTimeout is Config.CallTimeout's default.
const DefaultCallTimeout = time.Minute

// Manager runs one process per plugin, started on first use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	running map[string]*start // by name: started, or starting
	closed  bool
}

// start is a plugin Get started or is starting: p or err is set when
// ready is closed (with mu held, so that Close sees either a plugin to
// stop or a start that will stop it itself).
type start struct {
	ready chan struct{}
	p     *Plugin
	err   error
	// again says the start failed because the caller that made it gave
	// up: another caller waiting for it starts the plugin afresh.
	again bool
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
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	return &Manager{cfg: cfg, running: map[string]*start{}}
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
// plugin whose process has exited is started again. No lock is held while
// a plugin starts and describes itself: a plugin slow at it holds up only
// the callers that want that plugin, and only until its deadline, when
// it is killed.
func (m *Manager) Get(ctx context.Context, name string) (*Plugin, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, fmt.Errorf("plugin %s: %w", name, ErrClosed)
		}
		s, ok := m.running[name]
		if !ok {
			s = &start{ready: make(chan struct{})}
			m.running[name] = s
		}
		m.mu.Unlock()
		if !ok {
			m.start(ctx, name, s)
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin %s: %w", name, context.Cause(ctx))
		}
		if s.err != nil {
			if s.again && ctx.Err() == nil {
				continue
			}
			return nil, s.err
		}
		select {
		case <-s.p.Exited():
			m.mu.Lock()
			if m.running[name] == s {
				delete(m.running, name)
			}
			m.mu.Unlock()
			s.p.Kill() // the process is gone: this only releases its client
		default:
			return s.p, nil
		}
	}
}

// errDescribeTimeout is the cause of a Describe call's context whose
// deadline passed.
var errDescribeTimeout = errors.New("the plugin did not describe itself in time")

// start starts a plugin and asks it to describe itself, within the call
// timeout on the manager's clock, and makes it ready. A start that fails
// is forgotten (the next Get tries again); one that ends after Close
// stops the plugin it started.
func (m *Manager) start(ctx context.Context, name string, s *start) {
	p, err := m.launch(ctx, name)
	m.mu.Lock()
	closed := m.closed && err == nil
	if closed {
		err = fmt.Errorf("plugin %s: %w", name, ErrClosed)
	}
	if err != nil {
		if m.running[name] == s {
			delete(m.running, name)
		}
		s.err, s.again = err, ctx.Err() != nil
	} else {
		s.p = p
	}
	close(s.ready)
	m.mu.Unlock()
	if closed {
		p.Kill()
	}
}

// launch starts a plugin's process and asks it to describe itself.
func (m *Manager) launch(ctx context.Context, name string) (*Plugin, error) {
	path, sum, err := m.Find(name)
	if err != nil {
		return nil, err
	}
	sp, err := pluginclient.Launch(pluginclient.LaunchConfig{Path: path, Checksum: sum, Logger: m.cfg.Logger.Named(name),
		Clock: m.cfg.Clock, KillGrace: m.cfg.KillGrace})
	if err != nil {
		return nil, launchError("plugin "+name, err)
	}
	dctx, cancel := clock.WithTimeout(ctx, m.cfg.Clock, m.cfg.CallTimeout, errDescribeTimeout)
	defer cancel()
	d, err := sp.Describe(dctx)
	if err != nil && errors.Is(context.Cause(dctx), errDescribeTimeout) {
		reason := fmt.Sprintf("the %s plugin did not answer Describe within %s, so the host killed it", name, m.cfg.CallTimeout)
		m.cfg.Logger.Error("plugin did not answer; killing it", "plugin", name, "call", "Describe", "timeout", m.cfg.CallTimeout, "pid", sp.Pid())
		sp.KillFor(reason) // returns once it is gone: its stderr is all there
		if tail := sp.StderrTail(); tail != "" {
			reason += "; the end of its stderr:\n" + tail
		}
		return nil, errors.New(reason)
	}
	if err != nil {
		sp.Kill()
		return nil, fmt.Errorf("plugin %s: describe: %w", name, err)
	}
	return &Plugin{Plugin: sp, Name: name, Path: path, Description: d}, nil
}

// Running returns the plugin's process, if the manager runs it (started,
// not starting, and not exited); it starts none.
func (m *Manager) Running(name string) (*Plugin, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.running[name]
	if !ok {
		return nil, false
	}
	select {
	case <-s.ready:
	default:
		return nil, false // starting: it may yet fail (a failed start is not here)
	}
	select {
	case <-s.p.Exited():
		return nil, false
	default:
		return s.p, true
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
	m.closed = true
	var started []*Plugin
	for _, s := range m.running {
		select {
		case <-s.ready:
			if s.err == nil {
				started = append(started, s.p)
			}
		default:
			// Starting: it finds the manager closed and stops what it
			// started itself.
		}
	}
	clear(m.running)
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range started {
		wg.Go(func() { kill(p) })
	}
	wg.Wait()
}
