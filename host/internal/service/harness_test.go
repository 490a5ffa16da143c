package service_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/host/internal/scenario"
	"github.com/baton-run/baton/host/internal/service"
	"github.com/baton-run/baton/host/internal/testbin"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/plugintest"
	"github.com/baton-run/baton/sdk/replay"
	"github.com/baton-run/baton/sdk/transcript"
)

// root is the repository root, from this package's directory.
const root = "../../.."

var (
	pluginDir string // holds baton-plugin-* and plugins.lock
	peerBin   string // the replay peer
)

// TestMain builds the real plugin and replay peer binaries once (or uses
// the ones `make build` made, named by $BATON_BIN).
func TestMain(m *testing.M) {
	plugintest.CoverChildren()
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	bins, err := testbin.Build(root, false)
	if err != nil {
		return 0, err
	}
	defer bins.Remove()
	pluginDir, peerBin = bins.Dir, bins.Peer
	return m.Run(), nil
}

// epoch is the instant every test's host starts at.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// env is one test's world: a host on a temp data dir, a workspace, and the
// service on a real unix socket, with a client.
type env struct {
	t      *testing.T
	data   string
	ws     string
	clock  *clock.Fake // the host's
	host   *orchestrator.Host
	srv    *service.Server
	client batonv1.BatonClient
	conn   *grpc.ClientConn
	sock   string
}

func newEnv(t *testing.T, opts service.Options, dial ...grpc.DialOption) *env {
	t.Helper()
	return newEnvOn(t, "", opts, dial...)
}

// newEnvHost is newEnv whose host has a name, as on a log several hosts
// share.
func newEnvHost(t *testing.T, host string) *env {
	t.Helper()
	return newEnvOn(t, host, service.Options{})
}

func newEnvOn(t *testing.T, host string, opts service.Options, dial ...grpc.DialOption) *env {
	t.Helper()
	e := &env{t: t, data: t.TempDir(), ws: t.TempDir(), clock: clock.NewFake(epoch)}
	h, err := orchestrator.Open(orchestrator.Config{DataDir: e.data, PluginDirs: []string{pluginDir},
		Logger: testLogger(t, "host"), Clock: e.clock, Host: host})
	if err != nil {
		t.Fatalf("open host: %v", err)
	}
	e.host = h
	if opts.Logger == nil {
		opts.Logger = testLogger(t, "service")
	}
	e.srv = service.New(h, opts)
	g := grpc.NewServer()
	e.srv.Register(g)
	e.sock = filepath.Join(shortDir(t), "baton.sock")
	lis, err := net.Listen("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.Serve(lis)
	}()
	e.conn = dialUnix(t, e.sock, dial...)
	e.client = batonv1.NewBatonClient(e.conn)
	t.Cleanup(func() {
		e.conn.Close()
		e.srv.Shutdown()
		g.Stop()
		<-served
		h.Close()
	})
	return e
}

// shortDir is a temp dir with a short path: a unix socket's path is at
// most about 100 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bsv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func dialUnix(t *testing.T, sock string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func testLogger(t *testing.T, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Warn, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// peer is the provider command that plays a transcript in the workspace.
func (e *env) peer(name string) *batonv1.ProviderCommand {
	abs, err := filepath.Abs(filepath.Join(root, "testdata", name))
	if err != nil {
		e.t.Fatal(err)
	}
	state := filepath.Join(e.t.TempDir(), "cursor")
	argv := []string{peerBin, "--transcript", abs, "--speed", "0", "--state", state}
	tr, err := transcript.ReadFile(abs)
	if err != nil {
		e.t.Fatal(err)
	}
	return &batonv1.ProviderCommand{Argv: append(argv, replay.PeerArgs(tr)...)}
}

// create creates a thread playing a transcript through the service.
func (e *env) create(cmdID, threadID, provider, transcript, policy string) *batonv1.Receipt {
	e.t.Helper()
	rc, err := e.client.CreateThread(e.t.Context(), &batonv1.CreateThreadRequest{CommandId: cmdID, ThreadId: threadID,
		Provider: provider, Cwd: e.ws, ProviderCommand: e.peer(transcript), ApprovalPolicy: policy})
	if err != nil {
		e.t.Fatalf("create thread: %v", err)
	}
	return rc
}

// decodeThread is a Thread's projection as the CLI reads it.
func decodeThread(_ *testing.T, th *batonv1.Thread) domain.Thread { return service.ThreadOf(th) }

// waitFor waits, through the service (GetThread, then Subscribe after its
// sequence), until the thread satisfies ok.
func (e *env) waitFor(threadID, what string, ok func(domain.Thread) bool) domain.Thread {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	defer cancel()
	th, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
	if err != nil {
		e.t.Fatal(err)
	}
	if d := decodeThread(e.t, th); ok(d) {
		return d
	}
	stream, err := e.client.Subscribe(ctx, &batonv1.SubscribeRequest{ThreadId: threadID, AfterSequence: th.GetSequence()})
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			e.t.Fatalf("waiting for %s: %v", what, err)
		}
		th, err := e.client.GetThread(ctx, &batonv1.GetThreadRequest{ThreadId: threadID})
		if err != nil {
			e.t.Fatal(err)
		}
		if d := decodeThread(e.t, th); ok(d) {
			return d
		}
	}
}

// allRunsEnded: at least n runs, all ended.
var allRunsEnded = scenario.RunsEnded

// messages reads a scenario's user messages (all groups, in order).
func messages(t *testing.T, name string) []string {
	t.Helper()
	return plugintest.ReadMessages(t, filepath.Join(root, "testdata", name))
}
