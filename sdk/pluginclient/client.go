// Package pluginclient is the host's half of the plugin protocol: Launch
// starts a plugin binary through go-plugin (checksum, handshake, protocol
// version) and returns a Client whose methods are the Adapter's, over gRPC.
// Plugin authors do not need it; the host and the conformance kit do.
package pluginclient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
	"github.com/baton-run/baton/sdk/internal/wire"
)

// LaunchConfig says how a host starts a plugin binary.
type LaunchConfig struct {
	// Path is the plugin executable.
	Path string
	// Checksum is the SHA-256 the binary must have; nil skips the check
	// (tests and development only).
	Checksum []byte
	// Logger receives the plugin's logs, re-logged under its name.
	Logger hclog.Logger
	// Env is added to the plugin's environment.
	Env []string
	// StartTimeout bounds the handshake (default 10s).
	StartTimeout time.Duration
	// KillGrace is how long Kill waits, after asking the plugin to shut
	// down, for it to exit before it kills the process (default
	// DefaultKillGrace).
	KillGrace time.Duration
	// Clock runs KillGrace (default clock.System).
	Clock clock.Clock
}

// DefaultKillGrace is LaunchConfig.KillGrace's default. It is longer than
// go-plugin's own wait for a plugin that answered the request to shut
// down (2s), so that a plugin that answers is let go by go-plugin.
const DefaultKillGrace = 5 * time.Second

// Plugin is a running plugin process as the host sees it.
type Plugin struct {
	gp    *plugin.Client
	proc  *os.Process
	log   hclog.Logger
	clock clock.Clock
	grace time.Duration
	kill  sync.Once
	// stderr is the end of what the plugin wrote to stderr.
	stderr *tail
	// killedFor is why the host killed the plugin (KillFor).
	killedFor atomic.Pointer[string]
	*Client
}

// Launch starts a plugin binary, checks its checksum and handshake, and
// returns a client for it.
func Launch(cfg LaunchConfig) (*Plugin, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	cmd := exec.Command(cfg.Path)
	cmd.Env = append(cmd.Environ(), cfg.Env...)
	dieWithHost(cmd)
	stderr := &tail{}
	var secure *plugin.SecureConfig
	if cfg.Checksum != nil {
		secure = &plugin.SecureConfig{Checksum: cfg.Checksum, Hash: sha256.New()}
	}
	gp := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake(sdk.ProtocolVersion),
		VersionedPlugins: wire.Plugins(nil, newClient),
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           cfg.Logger,
		Stderr:           stderr,
		StartTimeout:     cfg.StartTimeout,
	})
	rpc, err := gp.Client()
	if err != nil {
		gp.Kill()
		if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
			return nil, fmt.Errorf("start plugin %s: its SHA-256 does not match the one recorded for it; reinstall it or record the new checksum: %w", cfg.Path, err)
		}
		if v, ok := otherVersion(err); ok {
			return nil, fmt.Errorf("start plugin %s: %w", cfg.Path, &VersionError{Path: cfg.Path, Plugin: v, Host: sdk.ProtocolVersion})
		}
		return nil, fmt.Errorf("start plugin %s: %w", cfg.Path, err)
	}
	raw, err := rpc.Dispense(wire.PluginKey)
	if err != nil {
		gp.Kill()
		return nil, fmt.Errorf("start plugin %s: %w", cfg.Path, err)
	}
	// cmd.Process was set when go-plugin started the command, before
	// Client returned. Killing through it is safe against pid reuse: it
	// holds the process's pidfd.
	return &Plugin{gp: gp, proc: cmd.Process, log: cfg.Logger, clock: clock.Or(cfg.Clock), grace: cfg.KillGrace,
		stderr: stderr, Client: raw.(*Client)}, nil
}

// StderrTail is the end of what the plugin wrote to its stderr (at most
// StderrTailBytes, in whole lines): once Exited is closed, all of it, so
// a plugin that crashed says there why (a Go plugin's panic). The same
// lines also go to the launch's Logger.
func (p *Plugin) StderrTail() string { return p.stderr.String() }

// KillFor is Kill, saying why: KilledFor tells it afterwards (the first
// reason, when killed for several).
func (p *Plugin) KillFor(reason string) {
	p.killedFor.CompareAndSwap(nil, &reason)
	p.Kill()
}

// KillNow kills the plugin process at once (SIGKILL, no request to shut
// down first) and waits for go-plugin's cleanup; reason is what KilledFor
// says. For a host that will not wait (its user asked it to stop at once):
// the plugin's providers die with it (their parent-death signal).
func (p *Plugin) KillNow(reason string) {
	p.killedFor.CompareAndSwap(nil, &reason)
	if err := p.proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.log.Error("kill plugin", "pid", p.proc.Pid, "error", err)
	}
	p.Kill()
}

// KilledFor is the reason the plugin was killed for (KillFor), or "".
func (p *Plugin) KilledFor() string {
	if r := p.killedFor.Load(); r != nil {
		return *r
	}
	return ""
}

// Kill stops the plugin process and waits for it: it asks the plugin to
// shut down, and kills the process (SIGKILL) if it has not exited after
// the kill grace on the launch's clock. go-plugin's request to shut down
// has no deadline of its own, so a plugin that does not answer (stopped,
// or deadlocked) would otherwise hold Kill forever. A plugin killed so
// cannot close its provider processes; on Linux they die with it (their
// parent-death signal is SIGKILL, see providerproc), but what they
// started in their own process groups is left. Kill may be called more
// than once, and concurrently; every call returns once the plugin is gone.
func (p *Plugin) Kill() {
	p.kill.Do(func() {
		select {
		case <-p.Exited():
			p.gp.Kill() // nothing to wait for: only go-plugin's cleanup
			return
		default:
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.gp.Kill() // returns once the process has exited
		}()
		t := p.clock.NewTimer(p.grace)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C():
		}
		p.log.Warn("plugin did not exit after being asked to; killing it", "pid", p.proc.Pid, "grace", p.grace)
		if err := p.proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.log.Error("kill plugin", "pid", p.proc.Pid, "error", err)
		}
		<-done
	})
}

// Pid is the plugin's process id (for diagnostics and tests).
func (p *Plugin) Pid() int {
	if rc := p.gp.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

func newClient(exited context.Context, rpc pb.ProviderClient) any {
	return &Client{rpc: rpc, exited: exited}
}

// NewClient is a client of the provider service on conn, for a caller that
// dials a plugin itself (a test of an adapter served in process); exited
// ends when the plugin is gone. Launch is the usual way to a Client.
func NewClient(exited context.Context, conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: pb.NewProviderClient(conn), exited: exited}
}

// SingleEvents says the plugin streams one event a message: it was built
// before EventBatches, and Events fell back to the old stream.
func (c *Client) SingleEvents() bool { return c.noBatches.Load() }

// Client is the host's typed client of one plugin.
type Client struct {
	rpc    pb.ProviderClient
	exited context.Context
	// noBatches says the plugin does not serve EventBatches.
	noBatches atomic.Bool
}

// Exited is closed when the plugin process has exited.
func (c *Client) Exited() <-chan struct{} { return c.exited.Done() }

// Describe asks the plugin what it is and can do.
func (c *Client) Describe(ctx context.Context) (sdk.Description, error) {
	r, err := c.rpc.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return sdk.Description{}, wire.FromStatus(err)
	}
	return sdk.Description{Name: r.GetName(), Version: r.GetVersion(), WireProtocol: r.GetWireProtocol(),
		Capabilities: wire.CapsFromWire(r.GetCapabilities()), Notes: r.GetNotes(), SDKVersion: r.GetSdkVersion(),
		MCPTransports: wire.TransportsFromWire(r.GetMcpTransports())}, nil
}

// OpenSession starts a provider session.
func (c *Client) OpenSession(ctx context.Context, req sdk.OpenSessionRequest) (sdk.OpenSessionResponse, error) {
	r, err := c.rpc.OpenSession(ctx, wire.OpenToWire(req))
	if err != nil {
		return sdk.OpenSessionResponse{}, wire.FromStatus(err)
	}
	return sdk.OpenSessionResponse{ProviderSessionRef: r.GetProviderSessionRef(), ProviderThreadRef: r.GetProviderThreadRef(),
		ProviderPid: int(r.GetProviderPid()), Resumed: r.GetResumed()}, nil
}

// Events streams a session's events after a sequence until the session
// ends, ctx is done or the plugin goes away (the last yields an error).
func (c *Client) Events(ctx context.Context, sessionID string, after uint64) iter.Seq2[sdk.RuntimeEvent, error] {
	return func(yield func(sdk.RuntimeEvent, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		req := &pb.EventsRequest{SessionId: sessionID, AfterSequence: after}
		if !c.noBatches.Load() {
			st, err := c.rpc.EventBatches(ctx, req)
			var b *pb.EventBatch
			if err == nil {
				b, err = st.Recv() // a stream's refusal comes with its first message
			}
			if status.Code(err) != codes.Unimplemented {
				for ; err == nil; b, err = st.Recv() {
					for _, ev := range b.GetEvents() {
						if !yield(wire.EventFromWire(ev), nil) {
							return
						}
					}
				}
				if err != io.EOF {
					yield(sdk.RuntimeEvent{}, wire.FromStatus(err))
				}
				return
			}
			c.noBatches.Store(true) // a plugin built before EventBatches: one event a message
		}
		st, err := c.rpc.Events(ctx, req)
		if err != nil {
			yield(sdk.RuntimeEvent{}, wire.FromStatus(err))
			return
		}
		for {
			ev, err := st.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(sdk.RuntimeEvent{}, wire.FromStatus(err))
				return
			}
			if !yield(wire.EventFromWire(ev), nil) {
				return
			}
		}
	}
}

// AckEvents tells the plugin that a session's events up to seq are
// stored, so that it can drop them; a plugin that keeps no acknowledgements
// (built before them) is not told, and no error is returned for it.
func (c *Client) AckEvents(ctx context.Context, sessionID string, seq uint64) error {
	_, err := c.rpc.AckEvents(ctx, &pb.AckEventsRequest{SessionId: sessionID, Sequence: seq})
	if status.Code(err) == codes.Unimplemented {
		return nil
	}
	return wire.FromStatus(err)
}

// StartTurn starts a turn.
func (c *Client) StartTurn(ctx context.Context, req sdk.StartTurnRequest) (sdk.StartTurnResponse, error) {
	r, err := c.rpc.StartTurn(ctx, &pb.StartTurnRequest{SessionId: req.SessionID,
		Input: &pb.TurnInput{Text: req.Input.Text}, ClientTurnId: req.ClientTurnID})
	if err != nil {
		return sdk.StartTurnResponse{}, wire.FromStatus(err)
	}
	return sdk.StartTurnResponse{TurnRef: r.GetTurnRef()}, nil
}

// SteerTurn adds input to a running turn.
func (c *Client) SteerTurn(ctx context.Context, req sdk.SteerTurnRequest) error {
	_, err := c.rpc.SteerTurn(ctx, &pb.SteerTurnRequest{SessionId: req.SessionID, TurnRef: req.TurnRef,
		Input: &pb.TurnInput{Text: req.Input.Text}})
	return wire.FromStatus(err)
}

// InterruptTurn asks the provider to stop a turn (an acknowledgement only).
func (c *Client) InterruptTurn(ctx context.Context, req sdk.InterruptTurnRequest) error {
	_, err := c.rpc.InterruptTurn(ctx, &pb.InterruptTurnRequest{SessionId: req.SessionID, TurnRef: req.TurnRef})
	return wire.FromStatus(err)
}

// RespondToRequest answers an opened request.
func (c *Client) RespondToRequest(ctx context.Context, req sdk.RespondToRequestRequest) error {
	_, err := c.rpc.RespondToRequest(ctx, &pb.RespondToRequestRequest{SessionId: req.SessionID,
		RequestRef: req.RequestRef, Decision: string(req.Decision), Answers: req.Answers})
	return wire.FromStatus(err)
}

// RollbackThread drops turns from a provider thread.
func (c *Client) RollbackThread(ctx context.Context, req sdk.RollbackThreadRequest) (sdk.RollbackThreadResponse, error) {
	r, err := c.rpc.RollbackThread(ctx, wire.RollbackToWire(req))
	if err != nil {
		return sdk.RollbackThreadResponse{}, wire.FromStatus(err)
	}
	return sdk.RollbackThreadResponse{ThreadRef: r.GetThreadRef()}, nil
}

// ReadThreadSnapshot reads the provider's view of a thread.
func (c *Client) ReadThreadSnapshot(ctx context.Context, req sdk.ReadThreadSnapshotRequest) (sdk.ThreadSnapshot, error) {
	r, err := c.rpc.ReadThreadSnapshot(ctx, &pb.ReadThreadSnapshotRequest{SessionId: req.SessionID, ThreadRef: req.ThreadRef})
	if err != nil {
		return sdk.ThreadSnapshot{}, wire.FromStatus(err)
	}
	return sdk.ThreadSnapshot{TurnRefs: r.GetTurnRefs(), Detail: r.GetDetail()}, nil
}

// CloseSession stops a session's provider process.
func (c *Client) CloseSession(ctx context.Context, sessionID string) error {
	_, err := c.rpc.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: sessionID})
	return wire.FromStatus(err)
}

// ForceCloseSession ends a session whose provider did not stop when
// asked: its process group gets SIGTERM at once and SIGKILL after a grace
// (see sdk.ForceClose). A plugin older than sdk v1.2 closes it as
// CloseSession does.
func (c *Client) ForceCloseSession(ctx context.Context, sessionID string) error {
	_, err := c.rpc.CloseSession(ctx, &pb.CloseSessionRequest{SessionId: sessionID, Force: true})
	return wire.FromStatus(err)
}
