// Command replaypeer stands in for a provider process in tests: it plays a
// replay transcript on stdin/stdout, checks every frame the plugin sends, and
// exits as the transcript says.
//
//	replaypeer --transcript FILE [--workspace DIR] [--speed X] [--state FILE] [-- ARGS...]
//	replaypeer peer-args FILE
//	replaypeer record --out FILE --provider NAME --protocol P --scenario NAME --meta agentVersion=V --meta model=M [--workspace DIR] [--append] [--invocation] -- ARGV... [-- ARGS...]
//
// The first form plays; ARGS, when "--" is given, are the arguments the
// client started the provider with, checked as its first frame. The second
// prints what a command playing FILE needs after its flags
// (replay.PeerArgs: --listen for an HTTP transcript, "--" for one that
// checks the arguments), for scripts. The third records: it runs the real
// provider command, passes frames through both ways and writes what it saw
// as a transcript; with --invocation, the arguments after ARGV's own "--"
// are the client's, recorded as the invocation frame.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "record" {
		os.Exit(recordMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "peer-args" {
		os.Exit(peerArgsMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(replay.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// peerArgsMain prints the arguments a peer command for a transcript ends
// with (see replay.PeerArgs), space-separated, for shell scripts.
func peerArgsMain(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: replaypeer peer-args FILE")
		return replay.ExitBadUsage
	}
	t, err := transcript.ReadFile(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "replaypeer: %v\n", err)
		return replay.ExitBadUsage
	}
	fmt.Fprintln(stdout, strings.Join(replay.PeerArgs(t), " "))
	return replay.ExitOK
}
