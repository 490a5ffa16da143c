package sdk

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Description is what a plugin says about itself.
type Description struct {
	Name         string       `json:"name"`
	Version      string       `json:"version"`
	WireProtocol string       `json:"wireProtocol"`
	Capabilities Capabilities `json:"capabilities"`
	// Notes say how the plugin does each capability, or why it cannot, by
	// capability name (the Note* keys): what `baton plugin list` and the
	// README's capability matrix show beside yes and no.
	Notes map[string]string `json:"notes,omitempty"`
	// SDKVersion is the sdk the plugin was built with (Version); Serve
	// sets it.
	SDKVersion string `json:"sdkVersion,omitempty"`
	// MCPTransports are the MCP transports the plugin can pass on to its
	// provider (none: it passes on no MCP server). The host refuses a run
	// whose servers it cannot take before the session opens, and the
	// plugin checks again (CheckMCPServers).
	MCPTransports []MCPTransport `json:"mcpTransports,omitempty"`
}

// Keys of Description.Notes.
const (
	NoteSteering  = "steering"
	NoteInterrupt = "interrupt"
	NoteApprovals = "approvals"
	NoteSubagents = "subagents"
	NoteRollback  = "rollback"
	NoteResume    = "resume"
	NoteSnapshot  = "thread_snapshot"
	NoteMCP       = "mcp"
)

// Capabilities says what a plugin can do natively. The host decides by
// policy what to do where a capability is missing. Each field but
// Subagents is an optional interface of the Adapter (see Implemented);
// Subagents says the plugin reports child threads (thread_started with a
// ParentThreadRef), which the conformance suite checks.
type Capabilities struct {
	NativeSteering bool `json:"nativeSteering"` // Steerer
	Interrupt      bool `json:"interrupt"`      // Interrupter
	Approvals      bool `json:"approvals"`      // Responder
	Subagents      bool `json:"subagents"`
	NativeRollback bool `json:"nativeRollback"` // Rollbacker
	Resume         bool `json:"resume"`         // Resumer
	ThreadSnapshot bool `json:"threadSnapshot"` // SnapshotReader
}

// ProviderCommand is the provider process a session runs.
type ProviderCommand struct {
	Argv []string `json:"argv"`
	// Env holds KEY=VALUE entries added to the plugin's own environment.
	Env []string `json:"env,omitempty"`
}

// OpenSessionRequest asks for a new provider session.
type OpenSessionRequest struct {
	SessionID     string          `json:"sessionId"`
	Cwd           string          `json:"cwd"`
	Model         string          `json:"model,omitempty"`
	RuntimePolicy string          `json:"runtimePolicy,omitempty"`
	Command       ProviderCommand `json:"command"`
	// ResumeThreadRef is the provider's own thread (conversation) id to
	// continue, when the host has one from an earlier session. Only a
	// Resumer's ResumeSession is given one.
	ResumeThreadRef string `json:"resumeThreadRef,omitempty"`
	// RawFrameLog is where raw provider frames are kept; empty keeps none.
	RawFrameLog string `json:"rawFrameLog,omitempty"`
	// MCPServers are the MCP servers the provider may use in this session,
	// which the plugin passes on in its provider's own form, or refuses
	// (CheckMCPServers); their env values and headers are secrets
	// (MCPSecrets).
	MCPServers []MCPServer `json:"mcpServers,omitempty"`
}

// OpenSessionResponse names the provider's refs for the session.
type OpenSessionResponse struct {
	ProviderSessionRef string `json:"providerSessionRef,omitempty"`
	ProviderThreadRef  string `json:"providerThreadRef,omitempty"`
	// ProviderPid is the provider process id, for diagnostics.
	ProviderPid int `json:"providerPid,omitempty"`
	// Resumed says that ResumeThreadRef was resumed. False when it was
	// asked for means the provider could not, and a fresh conversation
	// started: the host must not pretend the context carried over.
	Resumed bool `json:"resumed,omitempty"`
}

// TurnInput is what the user sends.
type TurnInput struct {
	Text string `json:"text"`
}

// StartTurnRequest starts a turn in a session.
type StartTurnRequest struct {
	SessionID    string    `json:"sessionId"`
	Input        TurnInput `json:"input"`
	ClientTurnID string    `json:"clientTurnId,omitempty"`
}

// StartTurnResponse names the turn the provider started, when it says so at
// once; otherwise the TurnStarted event names it.
type StartTurnResponse struct {
	TurnRef string `json:"turnRef,omitempty"`
}

// SteerTurnRequest adds input to a running turn.
type SteerTurnRequest struct {
	SessionID string    `json:"sessionId"`
	TurnRef   string    `json:"turnRef"`
	Input     TurnInput `json:"input"`
}

// InterruptTurnRequest asks the provider to stop a turn. Returning from it is
// an acknowledgement only: the turn ends when its terminal event arrives.
type InterruptTurnRequest struct {
	SessionID string `json:"sessionId"`
	TurnRef   string `json:"turnRef,omitempty"`
}

// Decision is an answer to a runtime request, and how a request_resolved
// event says it was answered (its Status).
type Decision string

const (
	DecisionAccept           Decision = "accept"
	DecisionAcceptForSession Decision = "accept_for_session"
	DecisionDecline          Decision = "decline"
	DecisionCancel           Decision = "cancel"
	DecisionAnswer           Decision = "answer"
)

// Decisions are every answer a request takes, in the order they are
// offered.
func Decisions() []Decision {
	return []Decision{DecisionAccept, DecisionAcceptForSession, DecisionDecline, DecisionCancel, DecisionAnswer}
}

// Status is the decision as a request_resolved event's status.
//
// Deprecated: a Decision is a Status; use it as it is.
func (d Decision) Status() Status { return d }

// RespondToRequestRequest answers an approval or question.
type RespondToRequestRequest struct {
	SessionID  string            `json:"sessionId"`
	RequestRef string            `json:"requestRef"`
	Decision   Decision          `json:"decision"`
	Answers    map[string]string `json:"answers,omitempty"`
}

// RollbackThreadRequest removes the last Turns turns from a provider thread.
type RollbackThreadRequest struct {
	SessionID string `json:"sessionId"`
	ThreadRef string `json:"threadRef"`
	Turns     uint32 `json:"turns"`
	// BeforeTurnRef is the provider ref of the oldest turn to drop, when the
	// host knows it; an adapter that can check it refuses a rollback whose
	// Turns-th newest turn is another one.
	BeforeTurnRef string `json:"beforeTurnRef,omitempty"`
}

// Check is what a Rollbacker refuses before it asks its provider anything:
// a rollback of another thread than the session's own (thread), of a
// provider that exited, or while turn running runs ("" for none). A
// rollback of no turns is done as it is: Check says so (done), and the
// response names thread.
func (r RollbackThreadRequest) Check(thread, running string, exited bool) (done bool, err error) {
	switch {
	case r.ThreadRef != "" && r.ThreadRef != thread:
		return false, Errorf(ErrInvalid, "rollback thread %s: the session's thread is %s", r.ThreadRef, thread)
	case r.Turns == 0:
		return true, nil
	case exited:
		return false, Errorf(ErrProviderExited, "rollback thread %s", thread)
	case running != "":
		return false, Errorf(ErrBusy, "rollback thread %s: turn %s is running", thread, running)
	}
	return false, nil
}

// RollbackTarget is the turn a rollback of want turns cuts before: of a
// provider's turns, oldest first, the oldest of the last want, checked
// against before (the host's ref for that turn; "" checks nothing).
// provider names the provider in the errors, which are ErrInvalid.
func RollbackTarget(provider string, turns []string, want int, before string) (string, error) {
	if want < 1 || len(turns) < want {
		return "", Errorf(ErrInvalid, "cannot drop %d turns: %s has %d on the thread", want, provider, len(turns))
	}
	id := turns[len(turns)-want]
	if before != "" && before != id {
		which := fmt.Sprintf("the oldest of the last %d turns", want)
		if want == 1 {
			which = "the newest turn"
		}
		return "", Errorf(ErrInvalid, "%s is %s in %s, but the host expected %s: %s's history differs from the host's",
			which, id, provider, before, provider)
	}
	return id, nil
}

// RollbackThreadResponse names the thread to continue on.
type RollbackThreadResponse struct {
	ThreadRef string `json:"threadRef"`
}

// ReadThreadSnapshotRequest asks for the provider's view of a thread.
type ReadThreadSnapshotRequest struct {
	SessionID string `json:"sessionId"`
	ThreadRef string `json:"threadRef"`
}

// ThreadSnapshot is the provider's view of a thread.
type ThreadSnapshot struct {
	TurnRefs []string        `json:"turnRefs"`
	Detail   json.RawMessage `json:"detail,omitempty"`
}

// EventKind names a normalized runtime event.
type EventKind string

const (
	EventSessionState    EventKind = "session_state"
	EventThreadStarted   EventKind = "thread_started"
	EventTurnStarted     EventKind = "turn_started"
	EventItemStarted     EventKind = "item_started"
	EventItemUpdated     EventKind = "item_updated"
	EventItemCompleted   EventKind = "item_completed"
	EventContentDelta    EventKind = "content_delta"
	EventPlanUpdated     EventKind = "plan_updated"
	EventRequestOpened   EventKind = "request_opened"
	EventRequestResolved EventKind = "request_resolved"
	EventUsage           EventKind = "usage"
	EventRateLimit       EventKind = "rate_limit"
	EventTurnTerminal    EventKind = "turn_terminal"
	EventRuntimeExited   EventKind = "runtime_exited"
	EventDiagnostic      EventKind = "diagnostic"
)

// ItemKind names what an item is.
type ItemKind string

const (
	ItemAssistantMessage ItemKind = "assistant_message"
	ItemReasoning        ItemKind = "reasoning"
	ItemToolCall         ItemKind = "tool_call"
	ItemCommandExecution ItemKind = "command_execution"
	ItemFileChange       ItemKind = "file_change"
	ItemPlan             ItemKind = "plan"
	ItemSubagent         ItemKind = "subagent"
	ItemUserMessage      ItemKind = "user_message"
)

// Status is a runtime event's status: a word of one of four vocabularies,
// each its own type, chosen by the event's kind (see StatusesFor):
//
//   - TurnStatus: how a turn ended (turn_terminal);
//   - ExitStatus: how the provider process ended (runtime_exited);
//   - ItemStatus: where an item is (item_started, item_updated,
//     item_completed);
//   - Decision: how a request was answered (request_resolved).
//
// The set is closed: only these four types are statuses. So a word of one
// vocabulary is never taken for another's ("failed" ends a turn, an item
// or a process, and they are three statuses, not equal to each other),
// and a status converts to its vocabulary only by a type assertion or
// switch, never by a conversion the compiler would let through. Nil is no
// status. On the wire (JSON and protobuf) a status is its word.
type Status interface {
	// word closes the set, and is what the wire carries.
	word() string
}

// TurnStatus is how a turn ended: turn_terminal's status.
type TurnStatus string

// Turn statuses.
const (
	TurnCompleted   TurnStatus = "completed"
	TurnInterrupted TurnStatus = "interrupted"
	TurnFailed      TurnStatus = "failed"
)

// ExitStatus is how a provider process ended: runtime_exited's status.
type ExitStatus string

// Exit statuses.
const (
	ExitExited ExitStatus = "exited" // the provider ended on its own, cleanly
	ExitClosed ExitStatus = "closed" // the session was closed
	ExitFailed ExitStatus = "failed" // the provider ended on its own with an error
)

// ItemStatus is where an item is: the status of item_started,
// item_updated and item_completed. An item_updated may carry a provider's
// own word for an item in progress.
type ItemStatus string

// Item statuses.
const (
	ItemInProgress ItemStatus = "in_progress"
	ItemDone       ItemStatus = "completed"
	ItemFailed     ItemStatus = "failed"
	ItemDeclined   ItemStatus = "declined"
)

func (s TurnStatus) word() string { return string(s) }
func (s ExitStatus) word() string { return string(s) }
func (s ItemStatus) word() string { return string(s) }
func (d Decision) word() string   { return string(d) }

// StatusWord is a status's word, as the wire carries it ("" for none).
func StatusWord(s Status) string {
	if s == nil {
		return ""
	}
	return s.word()
}

// StatusOf is the status word w has on an event of kind: a TurnStatus on
// turn_terminal, an ExitStatus on runtime_exited, an ItemStatus on an
// item's events, a Decision on request_resolved; nil for "". On a kind
// with no vocabulary (one newer than this sdk) it is a status of no
// vocabulary, equal to no other, that keeps the word: what the wire
// carried is carried on. It is how a status is read off the wire; an
// adapter uses the vocabularies' own types.
func StatusOf(kind EventKind, w string) Status {
	if w == "" {
		return nil
	}
	switch kind {
	case EventTurnTerminal:
		return TurnStatus(w)
	case EventRuntimeExited:
		return ExitStatus(w)
	case EventItemStarted, EventItemUpdated, EventItemCompleted:
		return ItemStatus(w)
	case EventRequestResolved:
		return Decision(w)
	}
	return otherStatus(w)
}

// otherStatus is a status word on an event whose kind has no vocabulary.
type otherStatus string

func (s otherStatus) word() string { return string(s) }

// StatusesFor is the statuses an event of kind may carry (nil, no status,
// is always allowed), or nil when any status of its vocabulary goes
// (item_updated may carry a provider's own word for an item in progress)
// or the kind takes none.
func StatusesFor(kind EventKind) []Status {
	switch kind {
	case EventTurnTerminal:
		return []Status{TurnCompleted, TurnInterrupted, TurnFailed}
	case EventRuntimeExited:
		return []Status{ExitExited, ExitClosed, ExitFailed}
	case EventItemStarted:
		return []Status{ItemInProgress, ItemDone, ItemFailed, ItemDeclined}
	case EventItemCompleted:
		return []Status{ItemDone, ItemFailed, ItemDeclined}
	case EventRequestResolved:
		var out []Status
		for _, d := range Decisions() {
			out = append(out, d)
		}
		return out
	}
	return nil
}

// RequestKind is what a provider asks in a request_opened event. The host
// answers approvals by the thread's policy; questions need answers a
// policy cannot invent, so a policy declines them; a generic request (one
// the adapter does not know) is never answered by policy.
type RequestKind string

// Request kinds.
const (
	RequestPermission         RequestKind = "permission"           // use a tool
	RequestCommandApproval    RequestKind = "command_approval"     // run a command
	RequestFileChangeApproval RequestKind = "file_change_approval" // change files
	RequestPermissions        RequestKind = "permissions"          // widen the sandbox
	RequestUserInput          RequestKind = "user_input"           // a question for the user
	RequestGeneric            RequestKind = "generic"              // anything else
)

// OptionKind is what choosing a RequestOption does.
type OptionKind string

// Option kinds.
const (
	OptionAllowOnce    OptionKind = "allow_once"
	OptionAllowAlways  OptionKind = "allow_always"
	OptionRejectOnce   OptionKind = "reject_once"
	OptionRejectAlways OptionKind = "reject_always"
)

// RequestOption is one answer a provider offers for a request.
type RequestOption struct {
	ID    string     `json:"id"`
	Label string     `json:"label,omitempty"`
	Kind  OptionKind `json:"kind,omitempty"`
}

// Usage is token usage as the provider reports it.
type Usage struct {
	InputTokens       int64 `json:"inputTokens,omitempty"`
	OutputTokens      int64 `json:"outputTokens,omitempty"`
	CachedInputTokens int64 `json:"cachedInputTokens,omitempty"`
	ReasoningTokens   int64 `json:"reasoningTokens,omitempty"`
	TotalTokens       int64 `json:"totalTokens,omitempty"`
	// CostMicros is the cost the provider states for the usage, in
	// millionths of a US dollar (CostMicrosOf); 0: it stated none. Baton
	// never works a cost out itself.
	CostMicros int64 `json:"costMicros,omitempty"`
	// Model is the model the usage is of, when the provider names one.
	Model string `json:"model,omitempty"`
}

// CostMicrosOf is a cost a provider states in US dollars, in millionths
// of a dollar (rounded; a negative or non-finite cost, which no provider
// means, is none). Counting in whole micro-dollars keeps sums exact.
func CostMicrosOf(usd float64) int64 {
	if !(usd > 0) || usd >= math.MaxInt64/1e6 {
		return 0
	}
	return int64(math.Round(usd * 1e6))
}

// Add adds o's counts to u: a turn's usage is the sum of its model calls'.
// A count is never negative (a negative one, which no provider means,
// counts as none) and a sum stops at math.MaxInt64 instead of wrapping
// round to a negative count; so Add is commutative and associative, and
// the zero Usage adds nothing. Model stays where both name the same one
// or one names none; of two models it keeps the first in sort order (a
// breakdown by model is RuntimeEvent.ModelUsage).
func (u *Usage) Add(o Usage) {
	u.InputTokens = addCount(u.InputTokens, o.InputTokens)
	u.OutputTokens = addCount(u.OutputTokens, o.OutputTokens)
	u.CachedInputTokens = addCount(u.CachedInputTokens, o.CachedInputTokens)
	u.ReasoningTokens = addCount(u.ReasoningTokens, o.ReasoningTokens)
	u.TotalTokens = addCount(u.TotalTokens, o.TotalTokens)
	u.CostMicros = addCount(u.CostMicros, o.CostMicros)
	switch {
	case u.Model == "":
		u.Model = o.Model
	case o.Model != "" && o.Model != u.Model:
		u.Model = min(u.Model, o.Model) // the same whichever side is added
	}
}

// addCount is a+b over counts: negatives as 0, saturating at MaxInt64.
func addCount(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// MaxUnixSeconds is the last second of the year 9999: JSON and protobuf
// timestamps end there, and UnixSeconds gives no instant past it.
const MaxUnixSeconds = 253402300799

// UnixSeconds is the instant of a Unix time in seconds (a provider's
// rate-limit reset), in UTC. A time before 1970 or past the year 9999 is
// no instant a provider means, and no event could carry it: it is the zero
// time (unknown).
func UnixSeconds(sec int64) time.Time {
	if sec < 0 || sec > MaxUnixSeconds {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

// RateLimit says when a provider's limit resets.
type RateLimit struct {
	ResetsAt    time.Time `json:"resetsAt,omitzero"`
	UsedPercent float64   `json:"usedPercent,omitempty"`
	Scope       string    `json:"scope,omitempty"`
}

// LimitKind is what sort of provider limit ended a turn.
type LimitKind string

// Limit kinds.
const (
	// LimitUsageWindow: the plan's usage for a window (five hours, a week)
	// is spent; it comes back at the window's reset.
	LimitUsageWindow LimitKind = "usage_window"
	// LimitRate: too many requests for now (HTTP 429 without a spent
	// window).
	LimitRate LimitKind = "rate_limit"
	// LimitCredits: the account's credits or billing stop it; it comes
	// back when someone tops it up.
	LimitCredits LimitKind = "credits"
	// LimitOverload: the provider is overloaded (HTTP 529, 503).
	LimitOverload LimitKind = "overload"
)

// MaxLimitEvidence bounds Limit.Evidence: the frame a limit was read from
// is kept as evidence, not as a transcript.
const MaxLimitEvidence = 4096

// LimitEvidence is a Limit's Evidence: the frames it was read from, one a
// line (empty ones left out), cut to MaxLimitEvidence bytes, never inside
// a character.
func LimitEvidence[F ~[]byte](frames ...F) string {
	var b strings.Builder
	for _, f := range frames {
		if len(f) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.Write(f)
	}
	s, n := b.String(), MaxLimitEvidence
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Limit is a provider limit that ended a turn. An adapter that recognises
// one sets it on the turn's failed turn_terminal event; the host ends the
// run blocked (not failed) and its continuation policy decides what
// follows.
type Limit struct {
	Kind LimitKind `json:"kind"`
	// ResetsAt is when the provider says the limit lifts (zero: it did
	// not say, or said something that is no instant).
	ResetsAt time.Time `json:"resetsAt,omitzero"`
	// Scope names the limit in the provider's words (five_hour,
	// seven_day, primary, ...).
	Scope   string `json:"scope,omitempty"`
	Message string `json:"message,omitempty"`
	// Evidence is the raw frame (or frames) the limit was read from, cut
	// to MaxLimitEvidence bytes.
	Evidence string `json:"evidence,omitempty"`
}

// Failure says why something failed.
type Failure struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// RuntimeEvent is one normalized event from a provider session. Adapters
// fill everything but SessionID and Sequence, which the sdk assigns.
type RuntimeEvent struct {
	SessionID string    `json:"sessionId"`
	Sequence  uint64    `json:"sequence"`
	Kind      EventKind `json:"kind"`
	// RawFrame is the index of the provider frame this event came from in
	// the session's raw-frame log (0: none).
	RawFrame        uint64 `json:"rawFrame,omitempty"`
	ThreadRef       string `json:"threadRef,omitempty"`
	ParentThreadRef string `json:"parentThreadRef,omitempty"`
	TurnRef         string `json:"turnRef,omitempty"`
	ItemRef         string `json:"itemRef,omitempty"`
	ParentItemRef   string `json:"parentItemRef,omitempty"`
	// ClientTurnID, on a turn_started event, echoes the ClientTurnID of the
	// StartTurn request the turn is for, so the host binds the turn to the
	// attempt it meant (empty for turns it did not start: a subagent's).
	ClientTurnID string   `json:"clientTurnId,omitempty"`
	ItemKind     ItemKind `json:"itemKind,omitempty"`
	Title        string   `json:"title,omitempty"`
	Text         string   `json:"text,omitempty"`
	// Status is of the vocabulary of Kind (see Status and StatusOf).
	Status      Status          `json:"status,omitempty"`
	RequestRef  string          `json:"requestRef,omitempty"`
	RequestKind RequestKind     `json:"requestKind,omitempty"`
	Options     []RequestOption `json:"options,omitempty"`
	Usage       *Usage          `json:"usage,omitempty"`
	// ModelUsage, on a usage event, breaks Usage down by model where the
	// provider does: one Usage a model, each naming its Model, sorted by
	// model.
	ModelUsage []Usage    `json:"modelUsage,omitempty"`
	RateLimit  *RateLimit `json:"rateLimit,omitempty"`
	Failure    *Failure   `json:"failure,omitempty"`
	// Limit, on a failed turn_terminal event, says the turn ended on a
	// provider limit.
	Limit *Limit `json:"limit,omitempty"`
	// ThreadUsable, on a turn terminal event, says whether the provider
	// thread can take another turn.
	ThreadUsable bool            `json:"threadUsable,omitempty"`
	Detail       json.RawMessage `json:"detail,omitempty"`
}

// UnmarshalJSON reads an event as it was marshalled: its status word is
// read in the vocabulary of its kind (StatusOf), which a Status, an
// interface, cannot do by itself. As for any field, JSON without a status
// leaves e's as it was.
func (e *RuntimeEvent) UnmarshalJSON(b []byte) error {
	// plain is RuntimeEvent without this method; the outer Status, one
	// level shallower, takes the "status" key from plain's.
	type plain RuntimeEvent
	v := struct {
		*plain
		Status *string `json:"status"`
	}{plain: (*plain)(e)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Status != nil {
		e.Status = StatusOf(e.Kind, *v.Status)
	}
	return nil
}

// IsZero says the usage counts nothing and names nothing.
func (u Usage) IsZero() bool {
	return u.InputTokens == 0 && u.OutputTokens == 0 && u.CachedInputTokens == 0 && u.ReasoningTokens == 0 &&
		u.TotalTokens == 0 && u.CostMicros == 0 && u.Model == ""
}
