// Command baton-plugin-cursor is Baton's provider plugin for the Cursor
// agent CLI. The host starts it; for every turn it starts the command the
// host configured (by default `cursor-agent`) in print mode with
// stream-json output, one process per turn, and continues the chat with
// --resume.
package main

import (
	"os"

	"github.com/baton-run/baton/plugins/cursor/internal/cursor"
	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("cursor")
	if err := server.Serve(cursor.New(log), server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
