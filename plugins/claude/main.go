// Command baton-plugin-claude is Baton's provider plugin for Claude Code.
// The host starts it; it starts the command the host configured (by
// default `claude`) in print mode with stream-json input and output and the
// permission prompts on the control channel, and speaks Claude Code's
// NDJSON control protocol to it over stdio.
package main

import (
	"os"

	"github.com/baton-run/baton/plugins/claude/internal/claude"
	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("claude")
	if err := server.Serve(claude.New(log), server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
