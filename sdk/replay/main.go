package replay

import (
	"context"
	"errors"
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
//	-- ARGS...          the arguments the client gave the provider: checked as
//	                    the first outbound frame, {"argv": ARGS} (a plugin that
//	                    appends its flags to the provider command is configured
//	                    with a peer command ending in "--")
//	--listen ADDR       play an HTTP transcript as an HTTP server on ADDR
//	                    (127.0.0.1:0: a free port); the transcript's stdout
//	                    frames print the address (see transcript.Listen)
//	--trace FILE        append a line to FILE for each step a client cannot
//	                    see (Config.Trace), e.g. /dev/fd/3 for a test's pipe
//
// A runtime_exit entry that dies by a signal ends the process by it (see
// die). A provider that floods its output is an entry with "repeat":N
// (transcript.Entry.Repeat): the frame, or the exit's stderr, N times.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replaypeer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("transcript", "", "transcript `file` to play")
	workspace := fs.String("workspace", "", "directory that \"<workspace>\" stands for (default: the current directory)")
	speed := fs.Float64("speed", 1, "scale afterMs waits by 1/`x`; 0 plays without waiting")
	stateFile := fs.String("state", "", "keep the cursor in `file` across processes")
	listen := fs.String("listen", "", "serve an HTTP transcript on `addr` (127.0.0.1:0 for a free port)")
	traceFile := fs.String("trace", "", "append the peer's steps to `file`")
	if err := fs.Parse(args); err != nil {
		return ExitBadUsage
	}
	invocation, ok := invocationArgs(args, fs.Args())
	if *file == "" || !ok {
		fmt.Fprintln(stderr, "usage: replaypeer --transcript FILE [--workspace DIR] [--speed X] [--state FILE] [--listen ADDR] [--trace FILE] [-- ARGS...]")
		return ExitBadUsage
	}
	if err := CheckSpeed(*speed); err != nil {
		fmt.Fprintf(stderr, "replaypeer: --speed: %v\n", err)
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
	var trace io.Writer
	if *traceFile != "" {
		f, err := os.OpenFile(*traceFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "replaypeer: --trace: %v\n", err)
			return ExitBadUsage
		}
		defer f.Close()
		trace = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg := Config{Transcript: t, Workspace: *workspace, Speed: *speed, In: stdin, Out: stdout, Err: stderr, Trace: trace,
		StateFile: *stateFile, Invocation: invocation}
	if *listen != "" {
		err = ServeHTTP(ctx, HTTPConfig{Config: cfg, Listen: *listen})
	} else {
		err = Run(ctx, cfg)
	}
	var pe *Error
	if errors.As(err, &pe) && pe.Quiet {
		// The transcript said what the process writes on stderr.
	} else if err != nil {
		fmt.Fprintf(stderr, "replaypeer: %s: %v\n", *file, err)
	}
	if pe != nil && pe.Signal != "" {
		// No test counts this block: the process dies by the signal and
		// writes no coverage counters (see die).
		stop()
		return die(pe.Signal)
	}
	return ExitCode(err)
}

// invocationArgs returns the arguments after "--" (nil when there is no
// "--"); rest is what the flag set left. Anything else left is bad usage.
func invocationArgs(args, rest []string) ([]string, bool) {
	if len(rest) == 0 {
		if len(args) > 0 && args[len(args)-1] == "--" {
			return []string{}, true
		}
		return nil, true
	}
	// The flag set stops at the first non-flag or after "--": it was a
	// "--" only if exactly the rest follows one.
	if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
		return rest, true
	}
	return nil, false
}
