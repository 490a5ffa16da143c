// Command baton-plugin-exec is a Baton provider plugin for any
// command-line agent that takes a prompt and prints an answer.
package main

import (
	"os"

	"github.com/baton-run/baton/sdk/server"
)

func main() {
	log := server.NewLogger("exec")
	if err := server.Serve(New(log), server.WithLogger(log)); err != nil {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
