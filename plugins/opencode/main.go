// Command baton-plugin-opencode is Baton's provider plugin for OpenCode.
// The host starts it; it starts the command the host configured (by
// default `opencode`) as `opencode serve --hostname 127.0.0.1 --port N`,
// and drives it over HTTP, reading its /event stream of server-sent events.
package main

import (
	"github.com/baton-run/baton/plugins/opencode/internal/opencode"
	"github.com/baton-run/baton/sdk"
)

func main() {
	log := sdk.NewLogger("opencode")
	sdk.Serve(opencode.New(log), sdk.WithLogger(log))
}
