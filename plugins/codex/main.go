// Command baton-plugin-codex is Baton's provider plugin for OpenAI Codex.
// The host starts it; it starts the command the host configured (by
// default `codex app-server`) and speaks the app-server's JSON-RPC protocol
// (v2) to it over stdio.
package main

import (
	"os"

	"github.com/baton-run/baton/plugins/codex/internal/codex"
	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("codex")
	if err := server.Serve(codex.New(log), server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
