package domain

import (
	"fmt"
	"strings"
)

// Facts are what a decision needs to know of the world that takes I/O to
// find out: whether a provider has a plugin to run it, whether a working
// directory can be worked in. The host gathers them before it takes the
// thread's writer lock (FactsFor says which a command needs), so that no
// file is read while the thread's other commands wait; Decide refuses a
// command the facts say could only fail its next run.
type Facts struct {
	// Providers is what the host found of the plugin of each provider
	// the command names.
	Providers map[string]ProviderFact
	// Installed names the providers that have a plugin, sorted; Searched
	// are the plugin directories looked in (none: none is configured).
	// Both are gathered when a provider named has no plugin, to say so.
	Installed []string
	Searched  []string
	// Dirs says of each directory the command names why it cannot be
	// worked in ("/x does not exist", "/x is not a directory"), or ""
	// when it can.
	Dirs map[string]string
	// Capabilities is what the plugin of the thread's provider says it
	// can do, when the decision needs it (NeedsCapabilities); nil: not
	// known (no plugin to ask).
	Capabilities *Capabilities
	// Worktree is what the host found of the repository a worktree
	// thread's worktree comes from (CreateThread with a WorktreeSpec).
	Worktree *WorktreeFact
}

// NeedsCapabilities says whether a command's decision needs what the
// plugin of the thread's provider can do: a rollback's reconciliation,
// decided once its files are restored, drops the provider's turns in a
// session only where the plugin can.
func NeedsCapabilities(p CommandPayload) bool {
	_, ok := p.(RecordFilesRestored)
	return ok
}

// capabilities is what the facts say the thread's provider's plugin can
// do (nothing, when they do not say).
func (f *Facts) capabilities() Capabilities {
	if f == nil || f.Capabilities == nil {
		return Capabilities{}
	}
	return *f.Capabilities
}

// ProviderFact is what the host found of a provider's plugin.
type ProviderFact struct {
	Installed bool
	// Unusable says why an installed plugin cannot be run (no checksum
	// recorded for it, say).
	Unusable string
}

// FactsFor names what a command's decision needs gathered: the providers
// it names (a thread's, a switch's, a policy's switch target) and the
// directory it names.
func FactsFor(p CommandPayload) (providers []string, dir string) {
	switch p := p.(type) {
	case CreateThread:
		return []string{p.Provider}, p.Cwd
	case SwitchProvider:
		return []string{p.Provider}, ""
	case SetPolicy:
		if p.Policy.OnLimit == OnLimitSwitch {
			return []string{p.Policy.SwitchTo}, ""
		}
	}
	return nil, ""
}

// check refuses a command whose provider has no plugin to run it (naming
// the providers that have one), or whose directory cannot be worked in.
// Nil facts were not gathered: nothing is checked (a caller that runs no
// plugins, as the domain's own tests).
func (f *Facts) check(p CommandPayload) error {
	if f == nil {
		return nil
	}
	providers, dir := FactsFor(p)
	for _, name := range providers {
		switch pf := f.Providers[name]; {
		case pf.Unusable != "":
			return fmt.Errorf("%w: %s", ErrInvalid, pf.Unusable)
		case !pf.Installed:
			installed := "none (no plugin directory is configured)"
			if len(f.Installed) > 0 {
				installed = strings.Join(f.Installed, ", ")
			} else if len(f.Searched) > 0 {
				installed = "none (searched " + strings.Join(f.Searched, ", ") + ")"
			}
			return fmt.Errorf("%w: provider %q is not installed; installed: %s", ErrInvalid, name, installed)
		}
	}
	if why := f.Dirs[dir]; dir != "" && why != "" {
		return fmt.Errorf("%w: cwd %s; give a directory that exists", ErrInvalid, why)
	}
	return nil
}
