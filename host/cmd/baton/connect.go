package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/eventlog"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/service"
)

// Bounds on finding a service: one named with --server may take a moment
// to answer; the data dir's socket is only tried.
const (
	serverCheckTimeout = 5 * time.Second
	socketCheckTimeout = time.Second
)

// client is a verb's way to the host: a service's, or one embedded for
// the command's life.
type client struct {
	batonv1.BatonClient
	embedded bool
	target   string // the service's address (not embedded)
	close    func()
	// follow, for an embedded host, makes it arm the thread's waits (a
	// service arms every thread's) until unfollow: a verb that follows a
	// thread's unattended work calls it.
	follow func(threadID string) (unfollow func())
	// halt, for an embedded host, ends its active runs at once and makes
	// close quick (orchestrator.Host.Halt): the user will not wait.
	halt func()
}

// haltNow ends an embedded host's active runs at once, without asking
// their providers (a second Ctrl-C). A service's runs are the service's:
// they go on.
func (c *client) haltNow() {
	if c.halt != nil {
		c.halt()
	}
}

// followWaits makes the host arm the thread's waits while the verb runs,
// until unfollow.
func (c *client) followWaits(threadID string) (unfollow func()) {
	if c.follow != nil {
		return c.follow(threadID)
	}
	return func() {}
}

// connect finds the host, by one rule: the service --server names (an
// error if it does not answer); else a service answering on the data dir's
// socket; else a host embedded on the data dir.
func (g *globals) connect(ctx context.Context) (*client, error) { return g.connectFor(ctx, false) }

// withReader is withClient for a verb that only reads (threads, show):
// where no service answers and the data dir cannot be held (another
// process holds it, or it cannot be written), the embedded host reads it
// read-only, and says so on stderr.
func withReader(cmd *cobra.Command, g *globals, fn func(ctx context.Context, c *client) error) error {
	ctx := cmd.Context()
	c, err := g.connectFor(ctx, true)
	if err != nil {
		return err
	}
	defer c.close()
	return fn(ctx, c)
}

// connectFor is connect; reads: the verb only reads (see withReader).
func (g *globals) connectFor(ctx context.Context, reads bool) (*client, error) {
	if g.server == "" {
		if err := g.checkData(); err != nil {
			return nil, err
		}
	}
	if c, err := g.findService(ctx); c != nil || err != nil {
		return c, err
	}
	if err := sharedLogDir(g.data); err != nil {
		return nil, err
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "baton", Output: g.stderr, Level: g.hostLogLevel()})
	cfg := orchestrator.Config{DataDir: g.data, Command: g.command, RawFrames: g.rawFrames, InterruptGrace: g.grace,
		TurnStallTimeout: g.stall, RequestTimeout: g.requests,
		PluginDirs: append(append([]string(nil), g.pluginDirs...), pluginSearchPath(g.data)...), Logger: log}
	h, err := g.embed(cfg, reads)
	var busy *orchestrator.BusyError
	switch {
	case errors.As(err, &busy) && strings.HasPrefix(busy.Command, "baton serve"):
		return nil, failf(exitFailed, "%v; it does not answer on %s: wait for it to start, or reach it with --server", busy, filepath.Join(g.data, "baton.sock"))
	case errors.As(err, &busy):
		return nil, failf(exitFailed, "%v; wait for it, or run `baton serve` so every baton command shares the data dir", busy)
	case errors.Is(err, eventlog.ErrDamaged):
		return nil, failf(exitFailed, "%v%s", err, doctorHint)
	case err != nil:
		return nil, failf(exitFailed, "%v", err)
	}
	if err := orchestrator.CheckDataDir(g.data); err != nil {
		fmt.Fprintf(g.stderr, "baton: warning: %v, and it holds your threads' messages: chmod 700 %s\n", err, g.data)
	}
	conn, stop, err := service.InProcess(h, service.Options{Logger: log})
	if err != nil {
		h.Close()
		return nil, failf(exitFailed, "%v", err)
	}
	return &client{BatonClient: batonv1.NewBatonClient(conn), embedded: true, close: func() {
		stop()
		h.Close()
	}, follow: func(threadID string) func() {
		if unfollow, err := h.Follow(threadID); err == nil {
			return unfollow
		}
		return func() {} // a thread it cannot read: the verb says so as it reads it
	}, halt: h.Halt}, nil
}

// sharedLogDir refuses to embed a host on the data dir of a host whose log
// is shared in NATS JetStream (serve --store keeps its replica there): its
// threads are not in DATA/events, and a host embedded there would write a
// private log of its own beside them. The service that does not answer is
// stopped.
func sharedLogDir(data string) error {
	if _, err := os.Stat(filepath.Join(data, replicaDir)); err != nil {
		return nil
	}
	return failf(exitFailed, "the data dir %s is a host's of a log shared in NATS JetStream (%s), and no service answers on it (its baton serve is stopped): start it, or reach another host of the installation with --server ADDRESS", data, filepath.Join(data, replicaDir))
}

// embed opens the host a verb embeds. One that only reads, on a data dir
// it cannot hold (unholdable), opens it read-only and says so on stderr; a
// process that holds it is asked for first, without a write (an open for
// writing would touch the lock file). The error is why the data dir could
// not be held.
func (g *globals) embed(cfg orchestrator.Config, reads bool) (*orchestrator.Host, error) {
	if !reads {
		return orchestrator.Open(cfg)
	}
	var err error
	if holder := orchestrator.Holder(cfg.DataDir); holder != nil {
		err = holder
	} else if h, oerr := orchestrator.Open(cfg); oerr == nil {
		return h, nil
	} else {
		err = oerr
	}
	why := unholdable(cfg.DataDir, err)
	if why == "" {
		return nil, err
	}
	cfg.ReadOnly = true
	h, rerr := orchestrator.Open(cfg)
	if rerr != nil {
		return nil, err
	}
	if errors.As(err, new(*orchestrator.BusyError)) {
		why += "; reading it read-only, as it stands now" // its holder's later writes are not seen
	} else {
		why += "; reading it read-only"
	}
	fmt.Fprintf(g.stderr, "baton: %s\n", why)
	return h, nil
}

// unholdable says why a host could not open the data dir to hold it
// ("": it could, or it failed otherwise), when the data dir can still be
// read: another process holds it, or it cannot be written.
func unholdable(data string, err error) string {
	var busy *orchestrator.BusyError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &busy):
		return busy.Error()
	case errors.Is(err, syscall.EROFS):
		return "the data dir " + data + " is on a read-only file system"
	case errors.Is(err, fs.ErrPermission):
		return "the data dir " + data + " cannot be written (permission denied)"
	}
	return ""
}

// logLevels are the levels --log-level takes.
var logLevels = []string{"trace", "debug", "info", "warn", "error", "off"}

// check checks the global flags every verb has, once they are set: what
// would otherwise be taken quietly (an unknown log level) or fail later
// in another's words.
func (g *globals) check(cmd *cobra.Command) error {
	if g.logLevel != "" && !slices.Contains(logLevels, g.logLevel) {
		return usagef("%s: --log-level must be %s or %s, got %q", verbOf(cmd), strings.Join(logLevels[:len(logLevels)-1], ", "),
			logLevels[len(logLevels)-1], g.logLevel)
	}
	if g.grace <= 0 {
		return usagef("%s: --grace must be a positive duration, such as 10s or 1m, got %s", verbOf(cmd), g.grace)
	}
	if g.stall < 0 {
		return usagef("%s: --turn-stall-timeout must be a duration, such as 30m or 2h, or 0 to never end a silent turn; got %s", verbOf(cmd), g.stall)
	}
	if g.requests < 0 {
		return usagef("%s: --request-timeout must be a duration, such as 10m or 1h, or 0 to let requests wait for an answer; got %s", verbOf(cmd), g.requests)
	}
	switch fs := cmd.Flags(); {
	case fromEnv(fs, "data"):
		g.dataFrom = envName("data") + "=" + g.data
	case fs.Changed("data"):
		g.dataFrom = "--data " + g.data
	default:
		g.dataFrom = "the default data dir " + g.data
	}
	return nil
}

// checkData refuses a data dir that is a file, or lies under one, before
// anything opens it (a mkdir's error would say it later).
func (g *globals) checkData() error {
	for dir := g.data; ; {
		fi, err := os.Stat(dir)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil && dir == g.data:
			return usagef("%s is a file, not a directory; give a directory for the data (it is made if missing)", g.dataFrom)
		case err == nil:
			return usagef("%s lies under %s, a file, not a directory; give a directory for the data (it is made if missing)", g.dataFrom, dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// findService is the service --server names (an error if it does not
// answer), else the one on the data dir's socket if one answers there
// (nil when none does).
func (g *globals) findService(ctx context.Context) (*client, error) {
	if g.server == "" {
		return g.local(ctx)
	}
	c, err := g.dial(ctx, g.server, serverCheckTimeout)
	var silent *noAnswer
	switch {
	case errors.Is(err, service.ErrRefused):
		return nil, failf(exitFailed, "server %s %s", g.server, refused)
	case errors.As(err, &silent) && silent.full:
		return nil, failf(exitFailed, "server %s %s", g.server, full)
	case errors.As(err, &silent):
		return nil, failf(exitFailed, "server %s does not answer: %s; start baton serve there, or leave out --server for a host of this command's own", g.server, silent)
	case err != nil:
		return nil, usagef("%v", err) // how to reach it, as given
	}
	return c, nil
}

// local is the service on the data dir's socket, if one answers there
// (nil when none does). The error says why it cannot be dialed as the
// flags say (a token or CA file that does not read, TLS on a socket):
// a usage error.
func (g *globals) local(ctx context.Context) (*client, error) {
	sock := filepath.Join(g.data, "baton.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != fs.ModeSocket {
		return nil, nil
	}
	c, err := g.dial(ctx, sock, socketCheckTimeout)
	var silent *noAnswer
	switch {
	case errors.As(err, &silent) && silent.full:
		return nil, failf(exitFailed, "the service on %s %s", sock, full)
	case errors.As(err, &silent):
		return nil, nil
	case err != nil:
		return nil, usagef("%v", err)
	}
	return c, nil
}

// noAnswer is a service that did not answer its health check: why, in
// words (the last of gRPC's, as "connection refused"); full when it
// closed the connection as it took it, as a service does that holds as
// many connections as it may.
type noAnswer struct {
	why  string
	full bool
}

func (e *noAnswer) Error() string { return e.why }

// streamEnded is the exit of a verb whose stream of a thread's events
// ended with err. A service that went away mid-stream (it drained, or
// died: Unavailable) is said so, with how to follow the thread once it is
// back; never in the transport's words (EOF).
func streamEnded(what, threadID string, err error) error {
	if status.Code(err) == codes.Unavailable {
		return failf(exitFailed, "the service stopped; once it runs again, follow the thread with: baton watch %s", threadID)
	}
	return rpcError(what, err)
}

// refused is what a service that refuses the caller's token says, and
// where a token comes from.
const refused = "refused: wrong or missing token (give --token-file or BATON_TOKEN_FILE)"

// full is what a service that closed the connection as it took it says:
// a service at its bound of connections does that.
const full = "closed the connection at once: it holds as many connections as it takes (baton serve --max-connections); try again once another of its clients ends"

// dial connects to a service and checks that it answers within bound. A
// service that does not is a *noAnswer; any other error is the flags'.
func (g *globals) dial(ctx context.Context, target string, bound time.Duration) (*client, error) {
	opts := service.DialOptions{TokenFile: g.tokenFile, TLS: g.tls, CAFile: g.caFile}
	if opts.TokenFile == "" && strings.HasPrefix(target, "tcp://") {
		if tok := filepath.Join(g.data, "token"); fileExists(tok) {
			opts.TokenFile = tok
		}
	}
	conn, err := service.Dial(ctx, target, opts)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := service.Check(cctx, conn); err != nil {
		conn.Close()
		return nil, &noAnswer{why: answerProblem(err, bound), full: closedAtOnce(err)}
	}
	if strings.HasPrefix(target, "tcp://") {
		if err := service.CheckToken(cctx, conn); err != nil { // health answers without it
			conn.Close()
			return nil, err
		}
	}
	return &client{BatonClient: batonv1.NewBatonClient(conn), target: target, close: func() { conn.Close() }}, nil
}

// answerProblem says why a health check failed without gRPC's words: the
// system's error at the end of its message ("connect: no such file or
// directory"), or that no answer came within bound.
func answerProblem(err error, bound time.Duration) string {
	st := status.Convert(err)
	msg := strings.TrimRight(st.Message(), `"`)
	switch {
	case st.Code() == codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within %v", bound)
	case strings.Contains(msg, "connect: "):
		return msg[strings.LastIndex(msg, "connect: "):]
	case st.Code() == codes.Unauthenticated:
		return "the token was refused (" + msg + ")"
	}
	return msg
}

// closedAtOnce says whether a health check failed because the service
// took the connection and closed it before it said a word of HTTP/2: what
// a service at its bound of connections does (service.Config.
// MaxConnections), where a socket no service listens on refuses the
// connection. gRPC says it in one of three ways, as the client's preface
// or its first read meets the close: a preface not written or not read,
// or the pipe broken.
func closedAtOnce(err error) bool {
	msg := status.Convert(err).Message()
	return status.Code(err) == codes.Unavailable &&
		(strings.Contains(msg, "preface") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset by peer"))
}

// thread reads a thread as the service holds it. The error is the API's.
func (c *client) thread(ctx context.Context, threadID string) (*batonv1.Thread, error) {
	return c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
}

// pageRuns and pageMessages are how many runs, and how many of their
// messages, a reader of a thread's pages asks for at a time (the
// service's defaults; variables so that a test can read a short thread in
// many pages).
var pageRuns, pageMessages uint32 = 100, 2000

// threadFrom is a thread from run from on as one projection: the one the
// service holds when it holds run from and every later one whole, else the
// thread's pages from run from to its newest, put end to end (each run's
// entries together; the header, summary and sequence of the last page).
// from 1 is the whole thread.
func (c *client) threadFrom(ctx context.Context, threadID string, from int) (*batonv1.Thread, error) {
	at, err := c.thread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	if pg := at.GetPage(); pg.GetRuns() == 0 || pg.GetFirstRun() > 0 && int(pg.GetFirstRun()) <= max(from, 1) && pg.GetMessagesAfter() == 0 {
		return at, nil
	}
	var all *batonv1.Thread
	for {
		after := uint32(0) // the messages of the page's runs read so far
		for {
			page, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID, FromRun: uint32(max(from, 1)), MaxRuns: pageRuns,
				MessagesAfter: after, MaxMessages: pageMessages})
			if err != nil {
				return nil, err
			}
			if after == 0 {
				all = addPage(all, page)
			} else {
				all.Messages = append(all.Messages, page.Messages...) // the same runs: only their messages are new
			}
			if after = page.GetPage().GetNextMessagesAfter(); after == 0 {
				break
			}
		}
		pg := all.GetPage()
		if pg.GetLastRun() == 0 || pg.GetLastRun() >= pg.GetRuns() {
			return all, nil
		}
		from = int(pg.GetLastRun()) + 1
	}
}

// addPage puts a page after the pages before it (all; nil: none), as
// domain.Thread's AddPage does: its entries after theirs, its header (the
// thread's as the page was read: summary, page, sequence, provider
// bindings, loop) in place of theirs, and nothing earlier.
func addPage(all, page *batonv1.Thread) *batonv1.Thread {
	out := proto.CloneOf(page)
	out.Earlier = nil
	if all == nil {
		return out
	}
	out.Runs = append(all.Runs, page.Runs...)
	out.Messages = append(all.Messages, page.Messages...)
	out.TurnItems = append(all.TurnItems, page.TurnItems...)
	out.ProviderSessions = append(all.ProviderSessions, page.ProviderSessions...)
	out.ProviderThreads = append(all.ProviderThreads, page.ProviderThreads...)
	out.ProviderTurns = append(all.ProviderTurns, page.ProviderTurns...)
	out.Requests = append(all.Requests, page.Requests...)
	out.Diagnostics = append(all.Diagnostics, page.Diagnostics...)
	out.CheckpointScopes = append(all.CheckpointScopes, page.CheckpointScopes...)
	out.Checkpoints = append(all.Checkpoints, page.Checkpoints...)
	out.Rollbacks = append(all.Rollbacks, page.Rollbacks...)
	out.Handoffs = append(all.Handoffs, page.Handoffs...)
	return out
}

// runAt is thread t's run of ordinal (nil: it has none), read from the
// service when the projection it holds (t) no longer has it.
func (c *client) runAt(ctx context.Context, t *batonv1.Thread, ordinal int) (*batonv1.Run, error) {
	if r := runByOrdinal(t, ordinal); r != nil || ordinal < 1 || ordinal > int(t.GetSummary().GetRuns()) {
		return r, nil
	}
	page, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: t.GetId(), FromRun: uint32(ordinal), ToRun: uint32(ordinal)})
	if err != nil {
		return nil, err
	}
	return runByOrdinal(page, ordinal), nil
}

// threadFor is thread for a verb: its errors are the verb's exits (see
// rpcError).
func (c *client) threadFor(ctx context.Context, verb, threadID string) (*batonv1.Thread, error) {
	t, err := c.thread(ctx, threadID)
	if err != nil {
		return nil, rpcError(verb, err)
	}
	return t, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// pluginSearchPath is where first-party and installed plugins are: beside
// the baton executable, then the data dir's plugins directory.
func pluginSearchPath(data string) []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs, filepath.Dir(exe))
	}
	return append(dirs, filepath.Join(data, "plugins"))
}

// defaultDataDir is the user's data directory for baton (BATON_DATA, like
// every flag's variable, is applied to --data).
func defaultDataDir() string {
	home, _ := os.UserHomeDir()
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Application Support", "baton")
	case "windows":
		return filepath.Join(os.Getenv("LocalAppData"), "baton")
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "baton")
	}
	return filepath.Join(home, ".local", "share", "baton")
}

// doctorHint ends the message of an error that says the store is damaged.
const doctorHint = "; run `baton doctor` to see what it touches"
