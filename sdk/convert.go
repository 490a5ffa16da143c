package sdk

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/baton-run/baton/sdk/internal/pluginpb"
)

// The conversions between sdk types and wire types. Both halves of the
// plugin boundary use them; nothing else touches pluginpb.

var eventKindToWire = map[EventKind]pb.EventKind{
	EventSessionState:    pb.EventKind_EVENT_KIND_SESSION_STATE,
	EventThreadStarted:   pb.EventKind_EVENT_KIND_THREAD_STARTED,
	EventTurnStarted:     pb.EventKind_EVENT_KIND_TURN_STARTED,
	EventItemStarted:     pb.EventKind_EVENT_KIND_ITEM_STARTED,
	EventItemUpdated:     pb.EventKind_EVENT_KIND_ITEM_UPDATED,
	EventItemCompleted:   pb.EventKind_EVENT_KIND_ITEM_COMPLETED,
	EventContentDelta:    pb.EventKind_EVENT_KIND_CONTENT_DELTA,
	EventPlanUpdated:     pb.EventKind_EVENT_KIND_PLAN_UPDATED,
	EventRequestOpened:   pb.EventKind_EVENT_KIND_REQUEST_OPENED,
	EventRequestResolved: pb.EventKind_EVENT_KIND_REQUEST_RESOLVED,
	EventUsage:           pb.EventKind_EVENT_KIND_USAGE,
	EventRateLimit:       pb.EventKind_EVENT_KIND_RATE_LIMIT,
	EventTurnTerminal:    pb.EventKind_EVENT_KIND_TURN_TERMINAL,
	EventRuntimeExited:   pb.EventKind_EVENT_KIND_RUNTIME_EXITED,
	EventDiagnostic:      pb.EventKind_EVENT_KIND_DIAGNOSTIC,
}

var eventKindFromWire = func() map[pb.EventKind]EventKind {
	m := make(map[pb.EventKind]EventKind, len(eventKindToWire))
	for k, v := range eventKindToWire {
		m[v] = k
	}
	return m
}()

// unknownEventKind is what a host sees for an event kind newer than its sdk.
const unknownEventKind EventKind = "unknown"

func eventToWire(ev RuntimeEvent) *pb.RuntimeEvent {
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
		Status:          ev.Status,
		RequestRef:      ev.RequestRef,
		RequestKind:     ev.RequestKind,
		ThreadUsable:    ev.ThreadUsable,
		Detail:          ev.Detail,
	}
	for _, o := range ev.Options {
		out.Options = append(out.Options, &pb.RequestOption{Id: o.ID, Label: o.Label, Kind: o.Kind})
	}
	if u := ev.Usage; u != nil {
		out.Usage = &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CachedInputTokens: u.CachedInputTokens, ReasoningTokens: u.ReasoningTokens, TotalTokens: u.TotalTokens}
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

func eventFromWire(in *pb.RuntimeEvent) RuntimeEvent {
	kind, ok := eventKindFromWire[in.GetKind()]
	if !ok {
		kind = unknownEventKind
	}
	ev := RuntimeEvent{
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
		ItemKind:        ItemKind(in.GetItemKind()),
		Title:           in.GetTitle(),
		Text:            in.GetText(),
		Status:          in.GetStatus(),
		RequestRef:      in.GetRequestRef(),
		RequestKind:     in.GetRequestKind(),
		ThreadUsable:    in.GetThreadUsable(),
		Detail:          in.GetDetail(),
	}
	for _, o := range in.GetOptions() {
		ev.Options = append(ev.Options, RequestOption{ID: o.GetId(), Label: o.GetLabel(), Kind: o.GetKind()})
	}
	if u := in.GetUsage(); u != nil {
		ev.Usage = &Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(),
			CachedInputTokens: u.GetCachedInputTokens(), ReasoningTokens: u.GetReasoningTokens(), TotalTokens: u.GetTotalTokens()}
	}
	if r := in.GetRateLimit(); r != nil {
		ev.RateLimit = &RateLimit{UsedPercent: r.GetUsedPercent(), Scope: r.GetScope()}
		if r.GetResetsAt() != nil {
			ev.RateLimit.ResetsAt = r.GetResetsAt().AsTime()
		}
	}
	if f := in.GetFailure(); f != nil {
		ev.Failure = &Failure{Code: f.GetCode(), Message: f.GetMessage()}
	}
	if l := in.GetLimit(); l != nil {
		ev.Limit = &Limit{Kind: LimitKind(l.GetKind()), Scope: l.GetScope(), Message: l.GetMessage(), Evidence: string(l.GetEvidence())}
		if l.GetResetsAt() != nil {
			ev.Limit.ResetsAt = l.GetResetsAt().AsTime()
		}
	}
	return ev
}

func capsToWire(c Capabilities) *pb.Capabilities {
	return &pb.Capabilities{NativeSteering: c.NativeSteering, Interrupt: c.Interrupt, Approvals: c.Approvals,
		Subagents: c.Subagents, NativeRollback: c.NativeRollback, Fork: c.Fork, Resume: c.Resume, ThreadSnapshot: c.ThreadSnapshot}
}

func capsFromWire(c *pb.Capabilities) Capabilities {
	return Capabilities{NativeSteering: c.GetNativeSteering(), Interrupt: c.GetInterrupt(), Approvals: c.GetApprovals(),
		Subagents: c.GetSubagents(), NativeRollback: c.GetNativeRollback(), Fork: c.GetFork(), Resume: c.GetResume(),
		ThreadSnapshot: c.GetThreadSnapshot()}
}

func openToWire(r OpenSessionRequest) *pb.OpenSessionRequest {
	return &pb.OpenSessionRequest{SessionId: r.SessionID, Cwd: r.Cwd, Model: r.Model, RuntimePolicy: r.RuntimePolicy,
		Command: &pb.ProviderCommand{Argv: r.Command.Argv, Env: r.Command.Env}, ResumeThreadRef: r.ResumeThreadRef,
		RawFrameLog: r.RawFrameLog}
}

func openFromWire(r *pb.OpenSessionRequest) OpenSessionRequest {
	return OpenSessionRequest{SessionID: r.GetSessionId(), Cwd: r.GetCwd(), Model: r.GetModel(),
		RuntimePolicy:   r.GetRuntimePolicy(),
		Command:         ProviderCommand{Argv: r.GetCommand().GetArgv(), Env: r.GetCommand().GetEnv()},
		ResumeThreadRef: r.GetResumeThreadRef(), RawFrameLog: r.GetRawFrameLog()}
}

func rollbackToWire(r RollbackThreadRequest) *pb.RollbackThreadRequest {
	return &pb.RollbackThreadRequest{SessionId: r.SessionID, ThreadRef: r.ThreadRef, Turns: r.Turns,
		BeforeTurnRef: r.BeforeTurnRef}
}

func rollbackFromWire(r *pb.RollbackThreadRequest) RollbackThreadRequest {
	return RollbackThreadRequest{SessionID: r.GetSessionId(), ThreadRef: r.GetThreadRef(), Turns: r.GetTurns(),
		BeforeTurnRef: r.GetBeforeTurnRef()}
}
