package replay

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/baton-run/baton/sdk/transcript"
)

// Main is the replay peer's command line: it parses args (without the
// program name), plays the transcript on stdin/stdout and returns the exit
// code. Failures are explained on stderr.
//
//	--transcript FILE   the transcript to play (required)
//	--workspace DIR     what "<workspace>" stands for (default: the cwd)
//	--speed X           scale afterMs waits; 0 means no waits (default 1)
//	--state FILE        keep the cursor in FILE, so that a restarted provider
//	                    continues after the runtime_exit where the last one ended
//	--listen ADDR       play an HTTP transcript as an HTTP server on ADDR; it
//	                    prints its address as the transcript's stdout frames
//	                    say; the arguments after "--" are the invocation
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replaypeer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("transcript", "", "transcript `file` to play")
	workspace := fs.String("workspace", "", "directory that \"<workspace>\" stands for (default: the current directory)")
	speed := fs.Float64("speed", 1, "scale afterMs waits by 1/`x`; 0 plays without waiting")
	stateFile := fs.String("state", "", "keep the cursor in `file` across processes")
	listen := fs.String("listen", "", "serve an HTTP transcript on `addr` (127.0.0.1:0 for a free port); the arguments after -- are the invocation")
	if err := fs.Parse(args); err != nil {
		return ExitBadUsage
	}
	if *listen != "" && *file != "" && *speed >= 0 {
		return mainHTTP(*file, *workspace, *speed, *stateFile, *listen, fs.Args(), stdin, stdout, stderr)
	}
	if *file == "" || fs.NArg() > 0 || *speed < 0 {
		fmt.Fprintln(stderr, "usage: replaypeer --transcript FILE [--workspace DIR] [--speed X] [--state FILE]")
		return ExitBadUsage
	}
	t, err := transcript.ReadFile(*file)
	if err != nil {
		fmt.Fprintf(stderr, "replaypeer: %v\n", err)
		return ExitBadUsage
	}
	if *workspace == "" {
		if *workspace, err = os.Getwd(); err != nil {
			fmt.Fprintf(stderr, "replaypeer: %v\n", err)
			return ExitBadUsage
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = Run(ctx, Config{Transcript: t, Workspace: *workspace, Speed: *speed, In: stdin, Out: stdout, StateFile: *stateFile})
	if err != nil {
		fmt.Fprintf(stderr, "replaypeer: %s: %v\n", *file, err)
	}
	return ExitCode(err)
}
