// Command baton-plugin-acp is Baton's provider plugin for Agent Client
// Protocol (v1) agents. The host starts it; it starts the agent command the
// host configured and speaks ACP to it over stdio.
package main

import (
	"github.com/baton-run/baton/plugins/acp/internal/acp"
	"github.com/baton-run/baton/sdk"
)

func main() {
	log := sdk.NewLogger("acp")
	sdk.Serve(acp.New(log), sdk.WithLogger(log))
}
