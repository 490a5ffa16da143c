// Command baton-plugin-claude is Baton's provider plugin for Claude Code.
// The host starts it; it starts the command the host configured (by
// default `claude`) in print mode with stream-json input and output and the
// permission prompts on the control channel, and speaks Claude Code's
// NDJSON control protocol to it over stdio.
package main

import (
	"github.com/baton-run/baton/plugins/claude/internal/claude"
	"github.com/baton-run/baton/sdk"
)

func main() {
	log := sdk.NewLogger("claude")
	sdk.Serve(claude.New(log), sdk.WithLogger(log))
}
