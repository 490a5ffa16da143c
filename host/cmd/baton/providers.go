package main

import (
	"slices"
	"strings"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// providers are the providers baton knows out of the box, in the order its
// help names them: each one's plugin name (baton-plugin-NAME, what
// --provider takes), the name people know it by, and its usual provider
// command, the one a thread runs when --provider-command is not given: its
// real binary, as its users install it. A plugin installed beside them is
// a provider too, with no usual command: a thread on it needs
// --provider-command.
var providers = []struct {
	name, title string
	argv        []string
}{
	{"acp", "ACP", []string{"claude-code-acp"}},
	{"codex", "Codex", []string{"codex", "app-server"}},
	{"claude", "Claude", []string{"claude"}},
	{"cursor", "Cursor", []string{"cursor-agent"}},
	{"opencode", "OpenCode", []string{"opencode"}},
}

// defaultCommand is provider's usual command (nil: it has none).
func defaultCommand(provider string) []string {
	for _, p := range providers {
		if p.name == provider {
			return slices.Clone(p.argv)
		}
	}
	return nil
}

// commandOfArgv is a provider command that runs argv (nil: none).
func commandOfArgv(argv []string) *batonv1.ProviderCommand {
	if argv == nil {
		return nil
	}
	return &batonv1.ProviderCommand{Argv: argv}
}

// providerTitles names the providers as the help does: "ACP, Codex, …".
func providerTitles() string {
	titles := make([]string, len(providers))
	for i, p := range providers {
		titles[i] = p.title
	}
	return strings.Join(titles, ", ")
}
