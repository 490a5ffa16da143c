// Command baton-plugin-codex is Baton's provider plugin for OpenAI Codex.
// The host starts it; it starts the command the host configured (by
// default `codex app-server`) and speaks the app-server's JSON-RPC protocol
// (v2) to it over stdio.
package main

import (
	"github.com/baton-run/baton/plugins/codex/internal/codex"
	"github.com/baton-run/baton/sdk"
)

func main() {
	log := sdk.NewLogger("codex")
	sdk.Serve(codex.New(log), sdk.WithLogger(log))
}
