package domain

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFactsRefuse: a thread, a switch or a policy whose provider has no
// plugin to run it is refused, naming the providers that have one (or
// where the host looked); so is a plugin that is there but cannot be run,
// and a thread whose directory cannot be worked in. The facts are the
// host's, gathered before the decision; a command they do not concern is
// not checked, nor is any command when none were gathered.
func TestFactsRefuse(t *testing.T) {
	installed := &Facts{Providers: map[string]ProviderFact{"acp": {Installed: true}, "codex": {Installed: true}}, Installed: []string{"acp", "codex"},
		Dirs: map[string]string{"/w": "", "/gone": "/gone does not exist"}}
	searched := &Facts{Searched: []string{"/p1", "/p2"}}
	unusable := &Facts{Providers: map[string]ProviderFact{"acp": {Installed: true,
		Unusable: "plugin acp at /p/baton-plugin-acp has no checksum in /p/plugins.lock"}}}
	create := func(cwd string) CreateThread {
		return CreateThread{Provider: "acp", Cwd: cwd, ProviderCommand: ProviderCommand{Argv: []string{"agent"}}}
	}
	toCodex := SetPolicy{Policy: ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "codex", SwitchCommand: ProviderCommand{Argv: []string{"codex"}}}}
	toNope := toCodex
	toNope.Policy.SwitchTo = "nope"
	for _, c := range []struct {
		name  string
		facts *Facts
		p     CommandPayload
		want  string
	}{
		{"a thread on an installed provider", installed, create("/w"), ""},
		{"a thread in a directory that is gone", installed, create("/gone"),
			"invalid command: cwd /gone does not exist; give a directory that exists"},
		{"a thread on a provider with no plugin", installed, CreateThread{Provider: "nope", Cwd: "/w"},
			`invalid command: provider "nope" is not installed; installed: acp, codex`},
		{"none installed where the host looked", searched, create("/w"),
			`invalid command: provider "acp" is not installed; installed: none (searched /p1, /p2)`},
		{"no plugin directory", &Facts{}, create("/w"),
			`invalid command: provider "acp" is not installed; installed: none (no plugin directory is configured)`},
		{"a plugin that cannot be run", unusable, create("/w"),
			"invalid command: plugin acp at /p/baton-plugin-acp has no checksum in /p/plugins.lock"},
		{"a switch to a provider with no plugin", installed, SwitchProvider{Provider: "nope", ProviderCommand: ProviderCommand{Argv: []string{"x"}}},
			`invalid command: provider "nope" is not installed; installed: acp, codex`},
		{"a policy that switches to a provider with no plugin", installed, toNope,
			`invalid command: provider "nope" is not installed; installed: acp, codex`},
		{"a message, which names no provider", &Facts{}, DispatchMessage{Text: "hi"}, ""},
		{"no facts gathered", nil, CreateThread{Provider: "nope", Cwd: "/gone"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &world{t: t, thread: &Thread{}, replica: &Thread{}}
			if _, ok := c.p.(CreateThread); !ok {
				w = newWorld(t)
			}
			env := w.env()
			env.Facts = c.facts
			th := w.thread.Clone()
			_, err := Decide(&th, Command{ID: "x", ThreadID: "thr", Payload: c.p}, env)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	// A policy that switches to an installed provider, and one that does
	// not switch, are decided as without facts.
	w := newWorld(t)
	env := w.env()
	env.Facts = installed
	th := w.thread.Clone()
	if _, err := Decide(&th, Command{ID: "p", ThreadID: "thr", Payload: toCodex}, env); err != nil {
		t.Fatal(err)
	}
}

// TestFactsFor: what each command needs gathered.
func TestFactsFor(t *testing.T) {
	type need struct {
		Providers []string
		Dir       string
	}
	for _, c := range []struct {
		p    CommandPayload
		want need
	}{
		{CreateThread{Provider: "acp", Cwd: "/w"}, need{[]string{"acp"}, "/w"}},
		{SwitchProvider{Provider: "codex"}, need{[]string{"codex"}, ""}},
		{SetPolicy{Policy: ContinuationPolicy{OnLimit: OnLimitSwitch, SwitchTo: "claude"}}, need{[]string{"claude"}, ""}},
		{SetPolicy{Policy: ContinuationPolicy{OnLimit: OnLimitWait}}, need{}},
		{DispatchMessage{Text: "hi"}, need{}},
	} {
		var got need
		got.Providers, got.Dir = FactsFor(c.p)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.p.CommandType(), diff)
		}
	}
}

// With no plugin to ask, or none asked, a plugin can do nothing: a
// rollback leaves the provider's conversation for a fresh one.
func TestCapabilitiesNotGathered(t *testing.T) {
	var none *Facts
	if none.capabilities() != (Capabilities{}) || (&Facts{}).capabilities() != (Capabilities{}) {
		t.Fatal("capabilities not gathered read as some")
	}
	caps := Capabilities{NativeRollback: true}
	if (&Facts{Capabilities: &caps}).capabilities() != caps {
		t.Fatal("gathered capabilities")
	}
}
