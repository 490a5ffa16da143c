package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/status"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
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
	// service arms every thread's): a verb that follows a thread's
	// unattended work calls it.
	follow func(threadID string)
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

// followWaits makes the host arm the thread's waits while the verb runs.
func (c *client) followWaits(threadID string) {
	if c.follow != nil {
		c.follow(threadID)
	}
}

// connect finds the host, by one rule: the service --server names (an
// error if it does not answer); else a service answering on the data dir's
// socket; else a host embedded on the data dir.
func (g *globals) connect(ctx context.Context) (*client, error) {
	if g.server != "" {
		c, err := g.dial(ctx, g.server, serverCheckTimeout)
		if err != nil {
			return nil, failf(exitFailed, "server %s does not answer: %s", g.server, status.Convert(err).Message())
		}
		return c, nil
	}
	if c := g.local(ctx); c != nil {
		return c, nil
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "baton", Output: g.stderr, Level: g.hostLogLevel()})
	h, err := orchestrator.Open(orchestrator.Config{DataDir: g.data, Command: g.command, RawFrames: g.rawFrames, InterruptGrace: g.grace,
		TurnStallTimeout: g.stall, RequestTimeout: g.requests,
		PluginDirs: append(append([]string(nil), g.pluginDirs...), pluginSearchPath(g.data)...), Logger: log})
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
	}, follow: func(threadID string) { _ = h.Follow(threadID) }, halt: h.Halt}, nil
}

// local is the service on the data dir's socket, if one answers there.
func (g *globals) local(ctx context.Context) *client {
	sock := filepath.Join(g.data, "baton.sock")
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != fs.ModeSocket {
		return nil
	}
	c, err := g.dial(ctx, sock, socketCheckTimeout)
	if err != nil {
		return nil
	}
	return c
}

// dial connects to a service and checks that it answers within bound.
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
		return nil, err
	}
	return &client{BatonClient: batonv1.NewBatonClient(conn), target: target, close: func() { conn.Close() }}, nil
}

// thread reads a thread and its projection. The error is the API's, or
// (with the thread) the projection's.
func (c *client) thread(ctx context.Context, threadID string) (*batonv1.Thread, domain.Thread, error) {
	at, err := c.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		return nil, domain.Thread{}, err
	}
	t, err := projection(at)
	return at, t, err
}

// threadFor is thread for a verb: its errors are the verb's exits (see
// rpcError; a projection that does not decode failed).
func (c *client) threadFor(ctx context.Context, verb, threadID string) (*batonv1.Thread, domain.Thread, error) {
	at, t, err := c.thread(ctx, threadID)
	switch {
	case err == nil:
		return at, t, nil
	case at == nil:
		return nil, domain.Thread{}, rpcError(verb, err)
	}
	return nil, domain.Thread{}, failf(exitFailed, "%v", err)
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
