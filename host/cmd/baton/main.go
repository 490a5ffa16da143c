// Command baton runs coding agents behind one durable model of threads and
// runs. 'baton run' runs the host embedded: it creates (or continues) a
// thread, sends each message as its own run, streams what happens, and
// exits when every run has ended.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage:
  baton run --provider NAME [--provider-command 'CMD ARGS'] [--cwd DIR] [--data DIR]
            [--thread ID] [--model M] [--json] MESSAGE...
  baton threads [--data DIR] [--json] [--after ID] [--limit N]
                                        the threads in the data dir, their status and runs
  baton diff THREAD [--run N] [--max-bytes N] [--data DIR]
                                        a run's changes: its checkpoint against the one before
  baton rollback THREAD --run N [--data DIR]
                                        put the files and the provider's conversation back
                                        to run N's checkpoint (0: before the first run)
  baton plugin list [--markdown]        what each installed provider plugin can do
  baton plugin lock DIR                 record the SHA-256 of every plugin in DIR
  baton plugin install NAME FILE [DIR]  install a plugin binary (default DIR: DATA/plugins)
  baton version
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], stdin, stdout, stderr)
	case "plugin":
		return pluginCmd(args[1:], stdout, stderr)
	case "threads":
		return threadsCmd(args[1:], stdout, stderr)
	case "diff":
		return diffCmd(args[1:], stdout, stderr)
	case "rollback":
		return rollbackCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "baton", version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "baton: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

const version = "0.1.0"
