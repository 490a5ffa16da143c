package main

import (
	"github.com/spf13/cobra"
)

func serveCommand(g *globals) *cobra.Command {
	return &cobra.Command{Use: "serve", Short: "Run the host as a service", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return failf(exitFailed, "serve: not yet") }}
}
