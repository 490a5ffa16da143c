// Command baton-plugin-opencode is Baton's provider plugin for OpenCode.
// The host starts it; it starts the command the host configured (by
// default `opencode`) as `opencode serve --hostname 127.0.0.1 --port N`,
// and drives it over HTTP, reading its /event stream of server-sent events.
package main

import (
	"os"

	"github.com/baton-run/baton/plugins/opencode/internal/opencode"
	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("opencode")
	if err := server.Serve(opencode.New(log), server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
