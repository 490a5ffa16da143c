package service

import (
	"cmp"
	"context"
	"os"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
	"github.com/baton-run/baton/host/internal/domain"
	"github.com/baton-run/baton/host/internal/orchestrator"
	"github.com/baton-run/baton/sdk"
)

// The reads: a thread, the list of threads, a run's diff, the plugins, the
// service's status.

// GetThread returns a thread's projection and the sequence it shows: as
// the host holds it, or a page of its runs (see baton.proto's
// GetThreadRequest).
func (s *Server) GetThread(_ context.Context, req *batonv1.GetThreadRequest) (*batonv1.Thread, error) {
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	q := orchestrator.PageQuery{FromRun: int(req.GetFromRun()), ToRun: int(req.GetToRun()), MaxRuns: int(req.GetMaxRuns()),
		MessagesAfter: int(req.GetMessagesAfter()), MaxMessages: int(req.GetMaxMessages())}
	if q.ToRun != 0 && q.ToRun < q.FromRun {
		return nil, invalid("to_run", "run %d is before from_run %d; give to_run 0 for every run from from_run on", q.ToRun, q.FromRun)
	}
	t, pg, err := s.host.ThreadPage(req.GetThreadId(), q)
	if err != nil {
		return nil, s.toStatus("GetThread", err)
	}
	return threadPB(t, pg), nil
}

// Page sizes of ListThreads.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// ListThreads lists threads in id order, a page at a time. The page token
// is the last id of the page before.
func (s *Server) ListThreads(_ context.Context, req *batonv1.ListThreadsRequest) (*batonv1.ListThreadsResponse, error) {
	size := int(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		size = maxPageSize
	}
	if err := checkID("page_token", req.GetPageToken()); err != nil {
		return nil, err
	}
	if st := req.GetStatus(); st != "" && !slices.Contains(domain.ThreadStatuses, domain.ThreadStatus(st)) {
		return nil, invalid("status", "unknown status %q; want %s", st, domain.OneOf(domain.ThreadStatuses...))
	}
	keep := func(t domain.ThreadSummary) bool {
		return (req.GetStatus() == "" || string(t.Status) == req.GetStatus()) &&
			(req.GetProvider() == "" || t.Provider == req.GetProvider()) && (req.GetAll() || !t.Archived)
	}
	// Read one more than the page holds: if it is there, a page follows.
	var page []domain.ThreadSummary
	after := req.GetPageToken()
	for len(page) <= size {
		batch, err := s.host.Threads(after, size+1)
		if err != nil {
			return nil, s.toStatus("ListThreads", err)
		}
		for _, t := range batch {
			if keep(t) {
				page = append(page, t)
			}
		}
		if len(batch) < size+1 {
			break
		}
		after = batch[len(batch)-1].ID
	}
	resp := &batonv1.ListThreadsResponse{}
	if len(page) > size {
		page = page[:size]
		resp.NextPageToken = page[size-1].ID
	}
	for _, t := range page {
		resp.Threads = append(resp.Threads, summaryPB(t))
	}
	return resp, nil
}

// Diff returns a run's changes against the checkpoint before it.
func (s *Server) Diff(ctx context.Context, req *batonv1.DiffRequest) (*batonv1.DiffResponse, error) {
	if err := required("thread_id", req.GetThreadId()); err != nil {
		return nil, err
	}
	d, c, err := s.host.Diff(ctx, req.GetThreadId(), int(req.GetRun()), int(req.GetMaxBytes()))
	if err != nil {
		return nil, s.toStatus("Diff", err)
	}
	resp := &batonv1.DiffResponse{Run: uint32(c.RunOrdinal), CheckpointId: c.ID, Commit: c.Commit,
		Patch: d.Text, Truncated: d.Truncated, Size: d.Size}
	for _, f := range c.Files {
		resp.Files = append(resp.Files, &batonv1.FileChange{Path: f.Path, Kind: f.Kind, Additions: int64(f.Additions),
			Deletions: int64(f.Deletions), Binary: f.Binary})
	}
	return resp, nil
}

// ListPlugins lists the installed plugins. One that cannot start is listed
// with its error in notes["error"].
func (s *Server) ListPlugins(ctx context.Context, _ *batonv1.ListPluginsRequest) (*batonv1.ListPluginsResponse, error) {
	infos, err := s.host.Plugins(ctx)
	if err != nil {
		return nil, s.toStatus("ListPlugins", err)
	}
	resp := &batonv1.ListPluginsResponse{}
	for _, p := range infos {
		d := p.Description
		c := d.Capabilities
		pb := &batonv1.Plugin{Name: p.Name, Version: d.Version, WireProtocol: d.WireProtocol, Path: p.Path, Notes: d.Notes,
			Capabilities: &batonv1.Capabilities{NativeSteering: c.NativeSteering, Interrupt: c.Interrupt, Approvals: c.Approvals,
				Subagents: c.Subagents, NativeRollback: c.NativeRollback, Resume: c.Resume, ThreadSnapshot: c.ThreadSnapshot},
			McpTransports: transportNames(d.MCPTransports)}
		if p.Err != nil {
			pb.Notes = map[string]string{"error": p.Err.Error()}
		}
		pb.Verification, pb.VerificationDetail = cmp.Or(p.Check.Problem, "verified"), p.Check.Detail
		resp.Plugins = append(resp.Plugins, pb)
	}
	return resp, nil
}

// GetStatus says what the service is and runs: its version and process,
// since when and where it serves, its active threads (from their live
// markers and heads) and its plugins (none started).
func (s *Server) GetStatus(ctx context.Context, _ *batonv1.GetStatusRequest) (*batonv1.ServiceStatus, error) {
	active, err := s.host.ActiveThreads()
	if err != nil {
		return nil, s.toStatus("GetStatus", err)
	}
	resp := &batonv1.ServiceStatus{Version: s.version, Pid: int32(os.Getpid()), DataDir: s.host.DataDir(),
		StartedAt: timestamppb.New(s.started), Uptime: durationpb.New(s.clk.Now().Sub(s.started)), Listeners: s.listeners,
		Runtime: runtimeStats(), Store: s.store}
	if resp.Store == nil {
		resp.Store = &batonv1.StoreStatus{Kind: "pebble"}
	}
	if s.coordinator != nil {
		resp.Store = proto.CloneOf(resp.Store)
		c, err := s.coordinator(ctx)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "GetStatus: %v", err)
		}
		resp.Store.Coordinator, resp.Store.Role = c, "host"
		if c == resp.Store.GetHost() {
			resp.Store.Role = "coordinator"
		}
	}
	for _, t := range active {
		resp.ActiveThreads = append(resp.ActiveThreads, summaryPB(t))
	}
	for _, p := range s.host.PluginStatuses() {
		resp.Plugins = append(resp.Plugins, &batonv1.PluginStatus{Name: p.Name, Path: p.Path, Pid: int32(p.PID), Version: p.Version})
	}
	return resp, nil
}

// transportNames are a plugin's MCP transports as the API spells them.
func transportNames(ts []sdk.MCPTransport) []string {
	var names []string
	for _, t := range ts {
		names = append(names, string(t))
	}
	return names
}
