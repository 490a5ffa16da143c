package wire

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/baton-run/baton/sdk"
	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

// The conversions between sdk types and wire types. Both halves of the
// plugin boundary (server and pluginclient) use them; nothing else touches
// pluginpb.

var eventKindToWire = map[sdk.EventKind]pb.EventKind{
	sdk.EventSessionState:    pb.EventKind_EVENT_KIND_SESSION_STATE,
	sdk.EventThreadStarted:   pb.EventKind_EVENT_KIND_THREAD_STARTED,
	sdk.EventTurnStarted:     pb.EventKind_EVENT_KIND_TURN_STARTED,
	sdk.EventItemStarted:     pb.EventKind_EVENT_KIND_ITEM_STARTED,
	sdk.EventItemUpdated:     pb.EventKind_EVENT_KIND_ITEM_UPDATED,
	sdk.EventItemCompleted:   pb.EventKind_EVENT_KIND_ITEM_COMPLETED,
	sdk.EventContentDelta:    pb.EventKind_EVENT_KIND_CONTENT_DELTA,
	sdk.EventPlanUpdated:     pb.EventKind_EVENT_KIND_PLAN_UPDATED,
	sdk.EventRequestOpened:   pb.EventKind_EVENT_KIND_REQUEST_OPENED,
	sdk.EventRequestResolved: pb.EventKind_EVENT_KIND_REQUEST_RESOLVED,
	sdk.EventUsage:           pb.EventKind_EVENT_KIND_USAGE,
	sdk.EventRateLimit:       pb.EventKind_EVENT_KIND_RATE_LIMIT,
	sdk.EventTurnTerminal:    pb.EventKind_EVENT_KIND_TURN_TERMINAL,
	sdk.EventRuntimeExited:   pb.EventKind_EVENT_KIND_RUNTIME_EXITED,
	sdk.EventDiagnostic:      pb.EventKind_EVENT_KIND_DIAGNOSTIC,
}

var eventKindFromWire = func() map[pb.EventKind]sdk.EventKind {
	m := make(map[pb.EventKind]sdk.EventKind, len(eventKindToWire))
	for k, v := range eventKindToWire {
		m[v] = k
	}
	return m
}()

// unknownEventKind is what a host sees for an event kind newer than its sdk.
const unknownEventKind sdk.EventKind = "unknown"

func EventToWire(ev sdk.RuntimeEvent) *pb.RuntimeEvent {
	out := &pb.RuntimeEvent{
		SessionId:       ev.SessionID,
		Sequence:        ev.Sequence,
		Kind:            eventKindToWire[ev.Kind],
		RawFrame:        ev.RawFrame,
		ThreadRef:       ev.ThreadRef,
		ParentThreadRef: ev.ParentThreadRef,
		TurnRef:         ev.TurnRef,
		ItemRef:         ev.ItemRef,
		ParentItemRef:   ev.ParentItemRef,
		ClientTurnId:    ev.ClientTurnID,
		ItemKind:        string(ev.ItemKind),
		Title:           ev.Title,
		Text:            ev.Text,
		Status:          sdk.StatusWord(ev.Status),
		RequestRef:      ev.RequestRef,
		RequestKind:     string(ev.RequestKind),
		ThreadUsable:    ev.ThreadUsable,
		Detail:          ev.Detail,
	}
	for _, o := range ev.Options {
		out.Options = append(out.Options, &pb.RequestOption{Id: o.ID, Label: o.Label, Kind: string(o.Kind)})
	}
	if u := ev.Usage; u != nil {
		out.Usage = UsageToWire(*u)
	}
	for _, u := range ev.ModelUsage {
		out.ModelUsage = append(out.ModelUsage, UsageToWire(u))
	}
	if r := ev.RateLimit; r != nil {
		out.RateLimit = &pb.RateLimit{UsedPercent: r.UsedPercent, Scope: r.Scope}
		if !r.ResetsAt.IsZero() {
			out.RateLimit.ResetsAt = timestamppb.New(r.ResetsAt)
		}
	}
	if f := ev.Failure; f != nil {
		out.Failure = &pb.Failure{Code: f.Code, Message: f.Message}
	}
	if l := ev.Limit; l != nil {
		out.Limit = &pb.Limit{Kind: string(l.Kind), Scope: l.Scope, Message: l.Message, Evidence: []byte(l.Evidence)}
		if !l.ResetsAt.IsZero() {
			out.Limit.ResetsAt = timestamppb.New(l.ResetsAt)
		}
	}
	return out
}

func EventFromWire(in *pb.RuntimeEvent) sdk.RuntimeEvent {
	kind, ok := eventKindFromWire[in.GetKind()]
	if !ok {
		kind = unknownEventKind
	}
	ev := sdk.RuntimeEvent{
		SessionID:       in.GetSessionId(),
		Sequence:        in.GetSequence(),
		Kind:            kind,
		RawFrame:        in.GetRawFrame(),
		ThreadRef:       in.GetThreadRef(),
		ParentThreadRef: in.GetParentThreadRef(),
		TurnRef:         in.GetTurnRef(),
		ItemRef:         in.GetItemRef(),
		ParentItemRef:   in.GetParentItemRef(),
		ClientTurnID:    in.GetClientTurnId(),
		ItemKind:        sdk.ItemKind(in.GetItemKind()),
		Title:           in.GetTitle(),
		Text:            in.GetText(),
		Status:          sdk.StatusOf(kind, in.GetStatus()),
		RequestRef:      in.GetRequestRef(),
		RequestKind:     sdk.RequestKind(in.GetRequestKind()),
		ThreadUsable:    in.GetThreadUsable(),
		Detail:          in.GetDetail(),
	}
	for _, o := range in.GetOptions() {
		ev.Options = append(ev.Options, sdk.RequestOption{ID: o.GetId(), Label: o.GetLabel(), Kind: sdk.OptionKind(o.GetKind())})
	}
	if u := in.GetUsage(); u != nil {
		u := UsageFromWire(u)
		ev.Usage = &u
	}
	for _, u := range in.GetModelUsage() {
		ev.ModelUsage = append(ev.ModelUsage, UsageFromWire(u))
	}
	if r := in.GetRateLimit(); r != nil {
		ev.RateLimit = &sdk.RateLimit{UsedPercent: r.GetUsedPercent(), Scope: r.GetScope()}
		if r.GetResetsAt() != nil {
			ev.RateLimit.ResetsAt = r.GetResetsAt().AsTime()
		}
	}
	if f := in.GetFailure(); f != nil {
		ev.Failure = &sdk.Failure{Code: f.GetCode(), Message: f.GetMessage()}
	}
	if l := in.GetLimit(); l != nil {
		ev.Limit = &sdk.Limit{Kind: sdk.LimitKind(l.GetKind()), Scope: l.GetScope(), Message: l.GetMessage(), Evidence: string(l.GetEvidence())}
		if l.GetResetsAt() != nil {
			ev.Limit.ResetsAt = l.GetResetsAt().AsTime()
		}
	}
	return ev
}

func CapsToWire(c sdk.Capabilities) *pb.Capabilities {
	return &pb.Capabilities{NativeSteering: c.NativeSteering, Interrupt: c.Interrupt, Approvals: c.Approvals,
		Subagents: c.Subagents, NativeRollback: c.NativeRollback, Resume: c.Resume, ThreadSnapshot: c.ThreadSnapshot}
}

func CapsFromWire(c *pb.Capabilities) sdk.Capabilities {
	return sdk.Capabilities{NativeSteering: c.GetNativeSteering(), Interrupt: c.GetInterrupt(), Approvals: c.GetApprovals(),
		Subagents: c.GetSubagents(), NativeRollback: c.GetNativeRollback(), Resume: c.GetResume(),
		ThreadSnapshot: c.GetThreadSnapshot()}
}

func OpenToWire(r sdk.OpenSessionRequest) *pb.OpenSessionRequest {
	out := &pb.OpenSessionRequest{SessionId: r.SessionID, Cwd: r.Cwd, Model: r.Model, RuntimePolicy: r.RuntimePolicy,
		Command: &pb.ProviderCommand{Argv: r.Command.Argv, Env: r.Command.Env}, ResumeThreadRef: r.ResumeThreadRef,
		RawFrameLog: r.RawFrameLog}
	for _, s := range r.MCPServers {
		out.McpServers = append(out.McpServers, &pb.McpServer{Name: s.Name, Transport: string(s.Transport),
			Command: s.Command, Args: s.Args, Env: nameValuesToWire(s.Env), Url: s.URL, Headers: nameValuesToWire(s.Headers)})
	}
	return out
}

func OpenFromWire(r *pb.OpenSessionRequest) sdk.OpenSessionRequest {
	out := sdk.OpenSessionRequest{SessionID: r.GetSessionId(), Cwd: r.GetCwd(), Model: r.GetModel(),
		RuntimePolicy:   r.GetRuntimePolicy(),
		Command:         sdk.ProviderCommand{Argv: r.GetCommand().GetArgv(), Env: r.GetCommand().GetEnv()},
		ResumeThreadRef: r.GetResumeThreadRef(), RawFrameLog: r.GetRawFrameLog()}
	for _, s := range r.GetMcpServers() {
		out.MCPServers = append(out.MCPServers, sdk.MCPServer{Name: s.GetName(), Transport: sdk.MCPTransport(s.GetTransport()),
			Command: s.GetCommand(), Args: s.GetArgs(), Env: nameValuesFromWire(s.GetEnv()), URL: s.GetUrl(),
			Headers: nameValuesFromWire(s.GetHeaders())})
	}
	return out
}

func nameValuesToWire(vs []sdk.NameValue) []*pb.NameValue {
	var out []*pb.NameValue
	for _, v := range vs {
		out = append(out, &pb.NameValue{Name: v.Name, Value: v.Value})
	}
	return out
}

func nameValuesFromWire(vs []*pb.NameValue) []sdk.NameValue {
	var out []sdk.NameValue
	for _, v := range vs {
		out = append(out, sdk.NameValue{Name: v.GetName(), Value: v.GetValue()})
	}
	return out
}

// TransportsToWire and TransportsFromWire convert a plugin's MCP
// transports.
func TransportsToWire(ts []sdk.MCPTransport) []string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t))
	}
	return out
}

func TransportsFromWire(ts []string) []sdk.MCPTransport {
	var out []sdk.MCPTransport
	for _, t := range ts {
		out = append(out, sdk.MCPTransport(t))
	}
	return out
}

func UsageToWire(u sdk.Usage) *pb.Usage {
	return &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens,
		ReasoningTokens: u.ReasoningTokens, TotalTokens: u.TotalTokens, CostMicros: u.CostMicros, Model: u.Model}
}

func UsageFromWire(u *pb.Usage) sdk.Usage {
	return sdk.Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(),
		CachedInputTokens: u.GetCachedInputTokens(), ReasoningTokens: u.GetReasoningTokens(), TotalTokens: u.GetTotalTokens(),
		CostMicros: u.GetCostMicros(), Model: u.GetModel()}
}

func RollbackToWire(r sdk.RollbackThreadRequest) *pb.RollbackThreadRequest {
	return &pb.RollbackThreadRequest{SessionId: r.SessionID, ThreadRef: r.ThreadRef, Turns: r.Turns,
		BeforeTurnRef: r.BeforeTurnRef}
}

func RollbackFromWire(r *pb.RollbackThreadRequest) sdk.RollbackThreadRequest {
	return sdk.RollbackThreadRequest{SessionID: r.GetSessionId(), ThreadRef: r.GetThreadRef(), Turns: r.GetTurns(),
		BeforeTurnRef: r.GetBeforeTurnRef()}
}
