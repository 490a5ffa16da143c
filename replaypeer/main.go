// Command replaypeer stands in for a provider process in tests: it plays a
// replay transcript on stdin/stdout, checks every frame the plugin sends, and
// exits as the transcript says.
//
//	replaypeer --transcript FILE [--workspace DIR] [--speed X] [--state FILE] [-- ARGS...]
//	replaypeer record --out FILE --provider NAME --scenario NAME [--workspace DIR] [--append] [--invocation] -- ARGV... [-- ARGS...]
//
// The first form plays; ARGS, when "--" is given, are the arguments the
// client started the provider with, checked as its first frame. The second
// form records: it runs the real provider command, passes frames through
// both ways and writes what it saw as a transcript; with --invocation, the
// arguments after ARGV's own "--" are the client's, recorded as the
// invocation frame.
package main

import (
	"os"

	"github.com/baton-run/baton/sdk/replay"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "record" {
		os.Exit(recordMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(replay.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
