package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/baton-run/baton/host/internal/pluginhost"
)

func pluginCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "list":
		return pluginListCmd(args[1:], stdout, stderr)
	case "lock":
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: baton plugin lock DIR")
			return exitUsage
		}
		names, err := pluginhost.Lock(args[1])
		if err != nil {
			fmt.Fprintf(stderr, "baton: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "recorded %d plugins in %s: %v\n", len(names), filepath.Join(args[1], pluginhost.LockfileName), names)
		return exitOK
	case "install":
		if len(args) != 3 && len(args) != 4 {
			fmt.Fprintln(stderr, "usage: baton plugin install NAME FILE [DIR]")
			return exitUsage
		}
		dir := filepath.Join(defaultDataDir(), "plugins")
		if len(args) == 4 {
			dir = args[3]
		}
		if err := pluginhost.Install(args[2], dir, args[1]); err != nil {
			fmt.Fprintf(stderr, "baton: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(stdout, "installed plugin %s in %s\n", args[1], dir)
		return exitOK
	}
	fmt.Fprintf(stderr, "baton: unknown plugin command %q\n", args[0])
	return exitUsage
}
