package main

import (
	"context"

	"github.com/baton-run/baton/host/internal/scenario"
)

// runScript performs a scenario's steps on a thread through the API, then
// waits for every run to end. Its pauses (sleepMs) are real ones.
func runScript(ctx context.Context, c *client, threadID string, s scenario.Script, prefix string) error {
	return scenario.Run(ctx, scenario.Client(c), threadID, s, scenario.Options{Sleep: true, CommandPrefix: prefix})
}
