package domain

import "time"

// Notices: which committed events need a person, for the host to tell
// them (webhooks: the notify package). It is a pure function of a batch of
// events and the thread they happened to; the decider knows nothing of it,
// and the host writes each notice's deliveries in the events' own batch.
//
// What needs a person:
//   - a request that waits for an answer (request.pending): opened, and not
//     answered by the thread's approval policy in the same decision;
//   - a run's end that someone waits for (run.ended): completed, failed or
//     interrupted (not cancelled or rolled back: a person did that; not
//     blocked: a limit wait, or its absence, follows);
//   - a usage-limit wait begun and ended (wait.started, wait.ended).

// NoticeType names an event that needs a person.
type NoticeType string

// Notice types.
const (
	NoticeRequestPending NoticeType = "request.pending"
	NoticeRunEnded       NoticeType = "run.ended"
	NoticeWaitStarted    NoticeType = "wait.started"
	NoticeWaitEnded      NoticeType = "wait.ended"
)

// NoticeTypes are the notice types, in the order of a person's day.
var NoticeTypes = []NoticeType{NoticeRequestPending, NoticeRunEnded, NoticeWaitStarted, NoticeWaitEnded}

// Notice is one event that needs a person.
type Notice struct {
	// Event is the event's index in the batch it was found in.
	Event int
	Type  NoticeType
	RunID string
	// Title is the thread's (Thread.Title: its first message, shortened).
	Title  string
	Detail NoticeDetail
}

// NoticeDetail is what a notice says beyond its type: the fields its type
// uses are set, the others empty. Its JSON form is the webhook's "detail".
type NoticeDetail struct {
	// request.pending
	RequestID string      `json:"request_id,omitempty"`
	Kind      RequestKind `json:"kind,omitempty"`
	Summary   string      `json:"summary,omitempty"`
	// run.ended
	Status     RunStatus `json:"status,omitempty"`
	StopReason string    `json:"stop_reason,omitempty"`
	Failure    *Failure  `json:"failure,omitempty"`
	// wait.started and wait.ended
	WaitID   string    `json:"wait_id,omitempty"`
	WaitKind WaitKind  `json:"wait_kind,omitempty"`
	Provider string    `json:"provider,omitempty"`
	Limit    LimitKind `json:"limit,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	Probe    int       `json:"probe,omitempty"`
	// wait.ended
	Outcome WaitOutcome `json:"outcome,omitempty"`
	Reason  string      `json:"reason,omitempty"`
}

// Notices returns the notices a batch of events calls for, in event
// order; t is the thread as it was before them (nil for a thread they
// create).
func Notices(t *Thread, events []Payload) []Notice {
	var out []Notice
	answered := map[string]bool{}
	waits := map[string]Wait{}
	if t != nil && t.Loop != nil {
		for _, w := range []*Wait{t.Loop.Wait, t.Loop.Return} {
			if w != nil {
				waits[w.ID] = *w
			}
		}
	}
	for _, e := range events {
		switch e := e.(type) {
		case RequestAnswered:
			answered[e.RequestID] = true
		case WaitArmed:
			waits[e.ID] = e.Wait
		}
	}
	title := noticeTitle(t, events)
	for i, e := range events {
		n := Notice{Event: i, Title: title}
		switch e := e.(type) {
		case RequestOpened:
			if answered[e.RequestID] {
				continue
			}
			n.Type, n.RunID = NoticeRequestPending, e.RunID
			n.Detail = NoticeDetail{RequestID: e.RequestID, Kind: e.Kind, Summary: oneLine(e.Title, 200)}
		case RunEnded:
			switch e.Status {
			case RunStatusCompleted, RunStatusFailed, RunStatusInterrupted:
			default:
				continue
			}
			n.Type, n.RunID = NoticeRunEnded, e.RunID
			n.Detail = NoticeDetail{Status: e.Status, StopReason: e.StopReason, Failure: e.Failure}
		case WaitArmed:
			n.Type, n.RunID = NoticeWaitStarted, e.RunID
			n.Detail = waitDetail(e.Wait)
		case WaitEnded:
			w := waits[e.WaitID]
			n.Type, n.RunID = NoticeWaitEnded, w.RunID
			n.Detail = waitDetail(w)
			n.Detail.WaitID, n.Detail.Outcome, n.Detail.Reason = e.WaitID, e.Outcome, e.Reason
		default:
			continue
		}
		out = append(out, n)
	}
	return out
}

// waitDetail is what a notice says of a wait.
func waitDetail(w Wait) NoticeDetail {
	return NoticeDetail{WaitID: w.ID, WaitKind: w.Kind, Provider: w.Provider, Limit: w.Limit.Kind, Until: w.At, Probe: w.Probe}
}

// noticeTitle is the thread's title, or the one the batch gives it (its
// first user message) when it has none yet.
func noticeTitle(t *Thread, events []Payload) string {
	if t != nil && t.Title != "" {
		return t.Title
	}
	for _, e := range events {
		if m, ok := e.(MessageAdded); ok && m.Role == RoleUser {
			return TitleOf(m.Text)
		}
	}
	return ""
}
