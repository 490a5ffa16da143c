package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
)

// What the service (internal/service) asks of the host beyond commands and
// streams: ids for what a client leaves unnamed, the receipt a command id
// already has, the thread a request is on, the installed plugins, and
// what the service's status shows (the active threads, the plugins'
// processes).

// NewID allocates an id from the host's allocator (the one the ids of
// Decide's events come from).
func (h *Host) NewID(prefix string) string { return h.cfg.IDs.NewID(prefix) }

// Receipt returns the receipt a command id has, if it has one.
func (h *Host) Receipt(commandID string) (domain.Receipt, bool, error) {
	if h.closed.Load() {
		return domain.Receipt{}, false, ErrClosed
	}
	b, ok, err := h.store.Receipt(commandID)
	if err != nil || !ok {
		return domain.Receipt{}, false, err
	}
	var rc domain.Receipt
	if err := json.Unmarshal(b, &rc); err != nil {
		return domain.Receipt{}, false, fmt.Errorf("receipt of %s is corrupt: %w", commandID, err)
	}
	return rc, true, nil
}

// RequestThread finds the thread a provider's request is on. A request
// that can still be answered is on a thread with a live session: this
// host's are in memory; on a shared log, the other hosts' are the log's
// live threads. Any other is not found.
func (h *Host) RequestThread(requestID string) (string, error) {
	h.smu.Lock()
	threads := make([]string, 0, len(h.sessions))
	for id, s := range h.sessions {
		if !s.ended() {
			threads = append(threads, id)
		}
	}
	h.smu.Unlock()
	slices.Sort(threads)
	if h.shared() {
		// Or another host's: its sessions are live in the log.
		live, err := h.store.LiveThreads()
		if err != nil {
			return "", fmt.Errorf("find request %q's thread: %w", requestID, err)
		}
		threads = append(threads, live...)
	}
	for _, id := range threads {
		t, err := h.view(id)
		if err != nil {
			continue // gone meanwhile
		}
		if slices.ContainsFunc(t.Requests, func(q domain.RuntimeRequest) bool { return q.ID == requestID }) {
			return id, nil
		}
	}
	return "", fmt.Errorf("%w: request %q is on no thread with a live provider session", domain.ErrNotFound, requestID)
}

// PluginInfo is one installed plugin: its binary and its description, or
// why it could not be started to describe itself.
type PluginInfo struct {
	Name        string
	Path        string
	Description sdk.Description
	Err         error
	// Check is what checking its binary against its directory's lockfile
	// found (Problem empty: it is as locked).
	Check pluginhost.Check
}

// Plugins lists the installed plugins by name, starting each that is not
// running to ask its description (the host keeps it running for its
// threads). A plugin that fails to start is listed with its error.
func (h *Host) Plugins(ctx context.Context) ([]PluginInfo, error) {
	var out []PluginInfo
	for _, name := range h.plugins.Installed() {
		p, err := h.plugins.Get(ctx, name)
		switch {
		case errors.Is(err, pluginhost.ErrClosed):
			return nil, ErrClosed
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			path, _, _ := h.plugins.Find(name)
			out = append(out, PluginInfo{Name: name, Path: path, Err: err})
			continue
		}
		d := p.Description
		d.Name = name // the name the host knows it by
		out = append(out, PluginInfo{Name: name, Path: p.Path, Description: d})
	}
	checks := map[string]pluginhost.Check{} // by path
	for dir := range dirsOf(out) {
		found, err := pluginhost.Verify(dir)
		if err != nil {
			return nil, err
		}
		for _, c := range found {
			checks[c.Path] = c
		}
	}
	for i := range out {
		out[i].Check = checks[out[i].Path]
	}
	return out, nil
}

// dirsOf is the directories the plugins' binaries are in.
func dirsOf(ps []PluginInfo) map[string]bool {
	dirs := map[string]bool{}
	for _, p := range ps {
		if p.Path != "" {
			dirs[filepath.Dir(p.Path)] = true
		}
	}
	return dirs
}

// ActiveThreads lists the threads a stop would leave in flight (a run
// active, a wait armed, a provider session open), in id order, from their
// live markers and heads: no thread's events are read.
func (h *Host) ActiveThreads() ([]domain.ThreadSummary, error) {
	live, err := h.store.LiveThreads()
	if err != nil {
		return nil, fmt.Errorf("list active threads: %w", err)
	}
	out := make([]domain.ThreadSummary, 0, len(live))
	for _, id := range live {
		b, found, err := h.store.Head(id)
		if err != nil {
			return nil, fmt.Errorf("list active threads: head of %s: %w", id, err)
		}
		if !found {
			continue // unreachable: a live marker is written with its thread's head
		}
		s, err := decodeHead(b)
		if err != nil {
			return nil, fmt.Errorf("list active threads: head of %s: %w", id, err)
		}
		if h.shared() && s.Host != "" && s.Host != h.cfg.Host {
			continue // another host's to stop
		}
		out = append(out, s)
	}
	return out, nil
}

// PluginStatus is an installed plugin, and its process when the host runs
// it.
type PluginStatus struct {
	Name    string
	Path    string // "" when it cannot be used (no checksum recorded, a mode refused)
	PID     int    // 0: not running
	Version string // what the running plugin says of itself
}

// PluginStatuses lists the installed plugins by name, each with its
// process when the host runs one. It starts none.
func (h *Host) PluginStatuses() []PluginStatus {
	var out []PluginStatus
	for _, name := range h.plugins.Installed() {
		ps := PluginStatus{Name: name}
		ps.Path, _, _ = h.plugins.Find(name)
		if p, ok := h.plugins.Running(name); ok {
			ps.PID, ps.Version = p.Pid(), p.Description.Version
		}
		out = append(out, ps)
	}
	return out
}

// DataDir is the data dir the host holds (or reads).
func (h *Host) DataDir() string { return h.cfg.DataDir }
