// Command baton-plugin-acp is Baton's provider plugin for Agent Client
// Protocol (v1) agents. The host starts it; it starts the agent command the
// host configured and speaks ACP to it over stdio.
package main

import (
	"os"

	"github.com/baton-run/baton/plugins/acp/internal/acp"
	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("acp")
	if err := server.Serve(acp.New(log), server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
