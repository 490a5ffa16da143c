package orchestrator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/ids"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// BenchmarkRun measures one simple run end to end: dispatch, a new provider
// session (the replay peer process), the turn through the real plugin, every
// event committed with fsync, and the projection. Its baseline,
// BenchmarkPluginOnly, drives the same plugin and transcript with the sdk
// client alone: the difference is what the host adds.
func BenchmarkRun(b *testing.B) {
	h, err := orchestrator.Open(orchestrator.Config{DataDir: b.TempDir(), PluginDirs: []string{pluginDir},
		Logger: hclog.NewNullLogger(), IDs: ids.Seeded(1)})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	transcript, msg := simpleScenario(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		rc, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprintf("create-%d", i), Payload: domain.CreateThread{
			Provider: "acp", Cwd: b.TempDir(), ProviderCommand: domain.ProviderCommand{Argv: []string{peerBin, "--transcript", transcript, "--speed", "0"}}}})
		if err != nil {
			b.Fatal(err)
		}
		_, seq, _ := h.Snapshot(rc.ThreadID)
		if _, err := h.Dispatch(ctx, domain.Command{ID: fmt.Sprintf("send-%d", i), ThreadID: rc.ThreadID,
			Payload: domain.DispatchMessage{Text: msg}}); err != nil {
			b.Fatal(err)
		}
		for rec, err := range h.Events(ctx, seq) {
			if err != nil {
				b.Fatal(err)
			}
			if rec.ThreadID == rc.ThreadID && rec.Type == (domain.RunEnded{}).EventType() {
				break
			}
		}
	}
}

func BenchmarkPluginOnly(b *testing.B) {
	p, err := sdk.Launch(sdk.LaunchConfig{Path: filepath.Join(pluginDir, "baton-plugin-acp")})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Kill()
	transcript, msg := simpleScenario(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("s%d", i)
		if _, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: id, Cwd: b.TempDir(),
			Command: sdk.ProviderCommand{Argv: []string{peerBin, "--transcript", transcript, "--speed", "0"}}}); err != nil {
			b.Fatal(err)
		}
		if _, err := p.StartTurn(ctx, sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: msg}}); err != nil {
			b.Fatal(err)
		}
		for ev, err := range p.Events(ctx, id, 0) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Kind == sdk.EventTurnTerminal {
				break
			}
		}
		if err := p.CloseSession(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// simpleScenario is the simple transcript's absolute path and its message.
func simpleScenario(b *testing.B) (transcript, message string) {
	transcript, err := filepath.Abs(filepath.Join(root, "testdata", "acp", "simple.ndjson"))
	if err != nil {
		b.Fatal(err)
	}
	return transcript, plugintest.ReadGroups(b, filepath.Join(root, "testdata", "acp", "simple.messages"))[0][0]
}

// BenchmarkPluginTurn measures one simple turn through each provider's
// plugin against its replay peer, with the sdk client alone: a new session
// (the peer process, and for opencode its HTTP server and event stream),
// the turn, and the close. The differences are the transports' own costs
// (JSON-RPC or stream-json on stdio, a process per turn, HTTP and SSE).
func BenchmarkPluginTurn(b *testing.B) {
	b.Setenv("BATON_REPLAYPEER", peerBin) // plugintest.PeerCommand's peer
	for _, provider := range []string{"acp", "codex", "claude", "cursor", "opencode"} {
		b.Run(provider, func(b *testing.B) {
			p, err := sdk.Launch(sdk.LaunchConfig{Path: filepath.Join(pluginDir, "baton-plugin-"+provider)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Kill()
			transcript := filepath.Join(root, "testdata", provider, "simple.ndjson")
			msg := firstMessage(b, provider, "simple")
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				id := fmt.Sprintf("s%d", i)
				ws := b.TempDir()
				if _, err := p.OpenSession(ctx, sdk.OpenSessionRequest{SessionID: id, Cwd: ws,
					Command: plugintest.PeerCommand(transcript, ws, "")}); err != nil {
					b.Fatal(err)
				}
				if _, err := p.StartTurn(ctx, sdk.StartTurnRequest{SessionID: id, Input: sdk.TurnInput{Text: msg}}); err != nil {
					b.Fatal(err)
				}
				for ev, err := range p.Events(ctx, id, 0) {
					if err != nil {
						b.Fatal(err)
					}
					if ev.Kind == sdk.EventTurnTerminal && ev.ParentThreadRef == "" {
						break
					}
				}
				if err := p.CloseSession(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// firstMessage is the first message a scenario's client sends: the first
// line of SCENARIO.messages, or the first send of SCENARIO.steps.json.
func firstMessage(b *testing.B, provider, scenario string) string {
	dir := filepath.Join(root, "testdata", provider)
	if data, err := os.ReadFile(filepath.Join(dir, scenario+".steps.json")); err == nil {
		var s struct {
			Steps []struct {
				Send string `json:"send"`
			} `json:"steps"`
		}
		if err := json.Unmarshal(data, &s); err != nil {
			b.Fatal(err)
		}
		for _, st := range s.Steps {
			if st.Send != "" {
				return st.Send
			}
		}
		b.Fatalf("%s/%s.steps.json sends nothing", provider, scenario)
	}
	return plugintest.ReadGroups(b, filepath.Join(dir, scenario+".messages"))[0][0]
}
