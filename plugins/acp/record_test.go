package main

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/plugintest"
)

// TestRecordMCP is how testdata/acp/record_mcp.sh records mcp_tools.ndjson
// from the real agent: the plugin opens a session with mcpServers (which
// `baton run` cannot configure yet) on the provider command the script
// gives (replaypeer record around the agent) and plays the one turn.
// Anywhere else it is skipped.
func TestRecordMCP(t *testing.T) {
	argv, ws := os.Getenv("BATON_ACP_RECORD_ARGV"), os.Getenv("BATON_ACP_RECORD_WS")
	if argv == "" || ws == "" {
		t.Skip("records only under testdata/acp/record_mcp.sh")
	}
	var cmd sdk.ProviderCommand
	if err := json.Unmarshal([]byte(argv), &cmd.Argv); err != nil {
		t.Fatalf("BATON_ACP_RECORD_ARGV: %v", err)
	}
	plugintest.Timeout = 3 * time.Minute // a real agent and its model
	p := plugintest.Start(t, plugintest.Build(t, "."))
	s := p.OpenWith(t, sdk.OpenSessionRequest{Cwd: ws, Command: cmd, MCPServers: mcpServers(ws)})
	s.Answer = sdk.DecisionAccept // the agent asks before it calls an MCP tool
	s.StartTurn(t, mcpPrompt)
	evs := s.WaitTurn(t)
	for _, ev := range evs {
		t.Logf("%s %s %s %s", ev.Kind, ev.ItemKind, ev.Title, ev.Detail)
	}
	if term := evs[len(evs)-1]; term.Status != sdk.TurnCompleted {
		t.Fatalf("the turn ended %s (%+v)", sdk.StatusWord(term.Status), term.Failure)
	}
	s.Close(t)
}
