package opencode

import (
	"github.com/hashicorp/go-hclog"

	"github.com/baton-run/baton/sdk"
	"github.com/baton-run/baton/sdk/clock"
	"github.com/baton-run/baton/sdk/sessions"
)

// The adapter's parts, one job a file: permission.go the permission config
// opencode starts with; server.go the server process (its start, its
// session, its exit and close); stream.go its SSE event stream; http.go
// one request to the server; mcp.go the host's MCP servers in
// opencode's form; turns.go turns, interrupts and answers;
// rollback.go the native revert; normalize.go events into runtime events.

// Version is the plugin's version.
const Version = "0.1.0"

// Adapter drives `opencode serve`. opencode keeps its sessions under
// $XDG_DATA_HOME/opencode (and reads its config from $XDG_CONFIG_HOME): the
// plugin leaves those as the provider command's environment has them, so
// that a session can be resumed by a later server; a host isolates
// opencode's state by giving the command its own XDG directories (as the
// recordings do). It implements sdk.Adapter and
// sdk.Rollbacker (the session's native revert). It does not implement
// sdk.Steerer: a prompt sent while a turn runs is queued by opencode and
// answered after the turn's current answer, not taken into it (see
// .notes/opencode-probe.md), so the host restarts the turn instead.
type Adapter struct {
	log      hclog.Logger
	clock    clock.Clock
	sessions sessions.Table[*session]
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithClock sets the clock the adapter's waits read: for the event stream
// after the server's exit, for the server after the stream ended, and
// lineproc's (default: the system clock).
func WithClock(c clock.Clock) Option { return func(a *Adapter) { a.clock = c } }

// New returns an adapter that logs to log.
func New(log hclog.Logger, opts ...Option) *Adapter {
	a := &Adapter{log: log}
	for _, o := range opts {
		o(a)
	}
	a.clock = clock.Or(a.clock)
	return a
}

// Describe implements sdk.Adapter.
func (a *Adapter) Describe() sdk.Description {
	return sdk.Description{
		Name:          "opencode",
		Version:       Version,
		WireProtocol:  WireProtocol,
		Capabilities:  sdk.Capabilities{Interrupt: true, Approvals: true, Subagents: true, NativeRollback: true, Resume: true},
		MCPTransports: mcpTransports,
		Notes: map[string]string{
			sdk.NoteSteering:  "a prompt sent while busy is only queued: answered after the current answer, which it cannot change",
			sdk.NoteInterrupt: "`POST /session/{id}/abort`",
			sdk.NoteApprovals: "`permission.asked` for commands and edits, answered with `POST /permission/{id}/reply`",
			sdk.NoteSubagents: "child sessions (`parentID`) as child threads",
			sdk.NoteRollback:  "`POST /session/{id}/revert` to before the turn's user message",
			sdk.NoteResume:    "the session id, on a restarted server with the same data directory",
			sdk.NoteMCP:       "stdio servers as `local` and http ones as `remote` in the `mcp` of OPENCODE_CONFIG_CONTENT, merged with the configuration opencode reads; their tools are SERVER_TOOL",
		},
	}
}

func (a *Adapter) session(id string) (*session, error) { return a.sessions.Get(id) }

var _ sdk.Rollbacker = (*Adapter)(nil)
