package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

func uiCommand(g *globals) *cobra.Command {
	var open, noOpen bool
	c := &cobra.Command{
		Use:   "ui [THREAD]",
		Short: "Sign a browser in to the service's dashboard",
		Long: `UI asks the service for a one-time sign-in link to its dashboard and prints
it (with THREAD, the link opens that thread's page). Opened once within five
minutes, the link signs the browser in with a session cookie (HttpOnly,
SameSite=Strict, twelve hours) and drops the code from the address; the
service's token never reaches the browser. The page has a sign-out button.

The dashboard is served on the service's TCP listeners: a service with only
its socket says which flag to give (baton serve --listen tcp://127.0.0.1:7077).
On a desktop (a display, or macOS) the link is opened in the default browser
too, unless --no-open; --open opens it anywhere xdg-open can.`,
		Example: `  baton serve --listen tcp://127.0.0.1:7077 &
  baton ui
  baton ui 01JD3W5Y2Q0K3V6C9B8N7M4X2A --no-open`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dialService(cmd.Context(), "ui", ": the dashboard is the service's; start one with baton serve --listen tcp://127.0.0.1:7077")
			if err != nil {
				return err
			}
			defer c.close()
			req := &batonv1.CreateLoginCodeRequest{}
			if len(args) == 1 {
				req.ThreadId = args[0]
			}
			code, err := c.CreateLoginCode(cmd.Context(), req)
			if err != nil {
				return rpcError("ui", err)
			}
			fmt.Fprintln(g.stdout, code.GetUrl())
			fmt.Fprintf(g.stderr, "baton: the link signs one browser in, once, until %s\n",
				code.GetExpiresAt().AsTime().Local().Format(time.TimeOnly))
			if (open || desktop()) && !noOpen {
				if err := openBrowser(cmd.Context(), code.GetUrl()); err != nil {
					fmt.Fprintf(g.stderr, "baton: could not open a browser (%v); open the link above\n", err)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&open, "open", false, "open the link in the default browser even without a desktop")
	c.Flags().BoolVar(&noOpen, "no-open", false, "only print the link")
	c.MarkFlagsMutuallyExclusive("open", "no-open")
	return c
}

// desktop says whether a browser can be opened here: macOS, or a display.
func desktop() bool {
	return runtime.GOOS == "darwin" || os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
}

// openBrowser opens url in the default browser, and does not wait for it.
func openBrowser(ctx context.Context, url string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.CommandContext(ctx, name, url)
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reaped when the opener returns, which it does at once
	return nil
}
