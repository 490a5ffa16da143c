// Command baton runs coding agents behind one durable model of threads and
// runs. Every verb is a client of the baton.v1 API: of a service (`baton
// serve`, reached with --server or on the data dir's socket) when one
// answers, else of a host it embeds for the command's life.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baton-run/baton/host/internal/rawframes"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

const version = "0.1.0"

func main() {
	eventlog.Fatal = func(msg string) {
		fmt.Fprintf(os.Stderr, "baton: %s; run `baton doctor` to check the store\n", msg)
		os.Exit(exitFailed)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exitError ends a command with an exit code; msg (when set) is printed as
// "baton: msg".
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func failf(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

func usagef(format string, args ...any) error { return failf(exitUsage, format, args...) }

// silent ends a command with code, having said why already.
func silent(code int) error { return &exitError{code: code} }

// rpcError turns an API error into an exit: a refusal of what the user
// gave (InvalidArgument, NotFound) is bad usage, exit 2; the rest failed,
// exit 1. The message is the server's.
func rpcError(what string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return failf(exitFailed, "%s: %v", what, err)
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.NotFound:
		return failf(exitUsage, "%s", cliWords(st.Message()))
	case codes.Canceled:
		return failf(exitInterrupted, "%s: cancelled", what)
	case codes.Unauthenticated:
		return failf(exitFailed, "%s: %s", what, refused)
	case codes.Unavailable: // it drained, or died: not the transport's words (EOF)
		return failf(exitFailed, "%s: the service stopped", what)
	case codes.DataLoss:
		return failf(exitFailed, "%s: %s%s", what, st.Message(), doctorHint)
	}
	return failf(exitFailed, "%s: %s", what, cliWords(st.Message()))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(stderr, "baton: %s\n", ee.msg)
		}
		return ee.code
	}
	// What cobra refused: an unknown verb or flag, wrong arguments.
	fmt.Fprintf(stderr, "baton: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	return exitUsage
}

// globals are the flags common to the verbs, declared once on the root.
type globals struct {
	data       string
	server     string
	tokenFile  string
	tls        bool
	caFile     string
	logLevel   string
	pluginDirs []string
	rawFrames  rawframes.Policy
	// grace is how long an interrupted provider has before the host this
	// command runs ends its process.
	grace time.Duration
	// stall and requests are that host's turn stall timeout and request
	// timeout (0: never).
	stall, requests time.Duration
	// command is the verb being run ("baton run"), for the data dir's pid
	// file.
	command string
	// dataFrom says where the data dir came from, for errors: --data,
	// BATON_DATA, or the default.
	dataFrom string

	stdin          io.Reader
	stdout, stderr io.Writer
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "baton",
		Short: "Run coding agents behind one durable model of threads and runs",
		Long: `Baton runs coding agents (` + providerTitles() + `) behind one
durable model of threads and runs.

Every verb speaks the baton.v1 API: to the service named by --server, else to
a service answering on the data directory's socket (DATA/baton.sock), else to
a host it embeds for the command's life (holding the data directory).

Every flag can also be set in the environment: --data as BATON_DATA,
--provider-command as BATON_PROVIDER_COMMAND, and so on (the command line
wins; repeatable flags take comma-separated values), on the verbs where the
flag means the same thing; each verb's help names the variables it takes.
BATON_PROVIDER, BATON_MODEL, BATON_PROVIDER_COMMAND, BATON_HANDOFF_MAX_BYTES
and the continuation policy's (BATON_ON_LIMIT, BATON_MAX_RUNS, ...) are a
new thread's: baton run's only, and not with --thread (a thread that goes on
changes only on the command line). BATON_RUN is a run ordinal: on diff,
rollback, cancel and send. --after has none (a thread id on threads, a
sequence on watch).

Exit codes: 0 done, 1 failed, 2 bad usage, 130 interrupted.`,
		Example: `  baton run --provider acp "Write hello.txt"
  baton threads
  baton show THREAD
  baton serve &
  baton watch THREAD`,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.command = cmd.CommandPath()
			if err := applyEnv(cmd); err != nil {
				return err
			}
			return g.check(cmd)
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	pf := root.PersistentFlags()
	pf.StringVar(&g.data, "data", defaultDataDir(), "data `directory`: the event log, plugins/, the service's socket")
	pf.StringVar(&g.server, "server", "", "the service's `address`: unix:///PATH, a socket path, or tcp://HOST:PORT (default: DATA/baton.sock when a service answers there, else an embedded host)")
	pf.StringVar(&g.tokenFile, "token-file", "", "`file` holding the bearer token for a TCP service (default: DATA/token); for serve, the token its TCP listeners require")
	pf.BoolVar(&g.tls, "tls", false, "speak TLS to a tcp:// server")
	pf.StringVar(&g.caFile, "ca-file", "", "PEM `file` of the certificates that verify a TLS server (implies --tls)")
	pf.StringVar(&g.logLevel, "log-level", "", "host log `level` on stderr: trace, debug, info, warn, error or off (default: off for a verb's embedded host, whose errors the verb reports itself; info for baton serve)")
	pf.StringArrayVar(&g.pluginDirs, "plugin-dir", nil, "extra plugin `directory` for the host this command runs (embedded, or baton serve) (repeatable)")
	addRawFramesFlags(pf, &g.rawFrames)
	pf.DurationVar(&g.grace, "grace", domain.DefaultInterruptGrace, "for the host this command runs (embedded, or baton serve): how long a provider asked to stop a run has to end it before the host ends its process (`duration`)")
	pf.DurationVar(&g.stall, "turn-stall-timeout", orchestrator.DefaultTurnStallTimeout, "for the host this command runs: how long a provider may say nothing mid-turn (unless it waits for an answer) before the host ends its process and the run fails, turn_stalled (`duration`; 0: never)")
	pf.DurationVar(&g.requests, "request-timeout", 0, "for the host this command runs: how long a provider's approval or question waits for an answer before the host declines it (an approval) or cancels it (anything else) (`duration`; 0: it waits)")
	root.RegisterFlagCompletionFunc("raw-frames", fixedCompletion("on", "off"))
	root.RegisterFlagCompletionFunc("log-level", fixedCompletion("trace", "debug", "info", "warn", "error", "off"))

	root.AddCommand(runCommand(g), threadsCommand(g), showCommand(g), watchCommand(g), sendCommand(g),
		interruptCommand(g), cancelCommand(g), answerCommand(g, "approve"), answerCommand(g, "decline"), diffCommand(g),
		rollbackCommand(g), switchCommand(g), mergeCommand(g), archiveCommand(g), compareCommand(g), pluginCommand(g), serveCommand(g), notifyCommand(g), mcpCommand(g), doctorCommand(g), versionCommand(g), statusCommand(g), uiCommand(g),
		usageCommand(g), limitsCommand(g), agentsCommand(g))
	addCompletions(root, g)
	root.SetVersionTemplate("baton {{.Version}}\n")
	root.InitDefaultCompletionCmd() // now, not at Execute: its flags' help names their variables too
	annotateEnv(root)
	return root
}

func versionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print baton's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(g.stdout, "baton", version)
			return nil
		},
	}
}

// hostLogLevel is the level of the log of a host a verb embeds: what
// --log-level says, else nothing: the verb says what went wrong in its own
// words, and the host's lines would only land on the user's terminal.
func (g *globals) hostLogLevel() hclog.Level {
	if g.logLevel == "" {
		return hclog.Off
	}
	return hclog.LevelFromString(g.logLevel)
}

func fixedCompletion(vals ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return vals, cobra.ShellCompDirectiveNoFileComp
	}
}
