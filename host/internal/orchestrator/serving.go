package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/pluginhost"
	"github.com/baton-run/baton/sdk"
)

// What the service (internal/service) asks of the host beyond commands and
// streams: ids for what a client leaves unnamed, the receipt a command id
// already has, the thread a request is on, and the installed plugins.

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
// that can still be answered is on a thread with a live session, and
// those are in memory; any other is not found.
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
	return out, nil
}
