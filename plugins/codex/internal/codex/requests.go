package codex

import (
	"encoding/json"
	"strings"

	"github.com/baton-run/baton/sdk"
)

// Request kinds, as the host knows them. Every server request is one of
// them: a method this plugin does not know is "generic", shown to the user
// with its method and params, and never dropped or answered on its own.
const (
	kindCommandApproval    = "command_approval"
	kindFileChangeApproval = "file_change_approval"
	kindPermissions        = "permissions"
	kindUserInput          = "user_input"
	kindGeneric            = "generic"
	// kindMCPToolApproval is an mcpServer/elicitation/request by which
	// codex asks whether an MCP server's tool may run (_meta's
	// codex_approval_kind "mcp_tool_call"); any other elicitation is
	// generic.
	kindMCPToolApproval = sdk.RequestPermission
)

// methodElicitation is the server request of an MCP server's elicitation.
const methodElicitation = "mcpServer/elicitation/request"

// requestKinds maps the server request methods this plugin understands.
var requestKinds = map[string]sdk.RequestKind{
	"item/commandExecution/requestApproval": kindCommandApproval,
	"item/fileChange/requestApproval":       kindFileChangeApproval,
	"item/permissions/requestApproval":      kindPermissions,
	"item/tool/requestUserInput":            kindUserInput,
}

// serverRequest is a request codex is waiting on an answer to.
type serverRequest struct {
	ref    string
	method string
	kind   sdk.RequestKind
	thread string
	turn   string
	params requestParams
	raw    json.RawMessage
}

// rpcError is a JSON-RPC error reply.
type rpcError struct {
	Code    int64
	Message string
}

// codeDeclined is the JSON-RPC error code of a declined generic request
// (the implementation-defined server error range).
const codeDeclined = -32000

// openRequest normalizes a server request into request_opened (after a
// thread_started, when the request is the first sign of a sub-agent).
func (n *normalizer) openRequest(ref, method string, raw json.RawMessage) (*serverRequest, []sdk.RuntimeEvent) {
	q := &serverRequest{ref: ref, method: method, kind: kindGeneric, raw: raw}
	var out []sdk.RuntimeEvent
	if kind, ok := requestKinds[method]; ok {
		if err := decodeParams(method, raw, &q.params); err != nil {
			// Shown as what it is, a request, and answered as a generic one.
			out = append(out, sdk.RuntimeEvent{Kind: sdk.EventDiagnostic, Title: "malformed frame", Text: err.Error()})
		} else {
			q.kind = kind
		}
	} else {
		// Any request may name its thread and turn.
		_ = json.Unmarshal(raw, &q.params)
		q.params = requestParams{ThreadID: q.params.ThreadID, TurnID: q.params.TurnID, ItemID: q.params.ItemID,
			ServerName: q.params.ServerName, Message: q.params.Message, Meta: q.params.Meta}
		if method == methodElicitation && q.params.Meta != nil && q.params.Meta.ApprovalKind == "mcp_tool_call" {
			q.kind = kindMCPToolApproval
		}
	}
	q.thread, q.turn = q.params.ThreadID, q.params.TurnID
	out = append(out, n.announce(q.thread, "")...)
	ev := sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, ThreadRef: q.thread, TurnRef: q.turn, RequestRef: ref,
		RequestKind: q.kind, ItemRef: q.params.ItemID, Detail: raw}
	switch q.kind {
	case kindCommandApproval:
		ev.Title = deref(q.params.Command)
		ev.Options = decisionOptions(q.params.AvailableDecisions)
	case kindFileChangeApproval:
		if it := n.items.Get(q.thread, q.params.ItemID); it != nil {
			ev.Title = it.Title
		}
		if ev.Title == "" {
			ev.Title = "file change"
		}
		if r := deref(q.params.Reason); r != "" {
			ev.Title += ": " + r
		}
	case kindPermissions:
		ev.Title = "additional permissions"
		if r := deref(q.params.Reason); r != "" {
			ev.Title += ": " + r
		}
	case kindMCPToolApproval:
		ev.Title = strings.TrimPrefix(q.params.ServerName+"/"+q.params.Meta.ToolName, "/")
		ev.Text = q.params.Message
		ev.Options = []sdk.RequestOption{{ID: "accept", Label: "Accept", Kind: "allow_once"},
			{ID: "decline", Label: "Decline", Kind: "reject_once"}, {ID: "cancel", Label: "Decline and stop the turn", Kind: "reject_once"}}
	case kindUserInput:
		var texts []string
		for _, qu := range q.params.Questions {
			texts = append(texts, qu.Question)
		}
		ev.Title = sdk.Title(strings.Join(texts, " / "))
		var qs struct {
			Questions json.RawMessage `json:"questions"`
		}
		if json.Unmarshal(raw, &qs) == nil {
			ev.Detail = qs.Questions
		}
	default:
		ev.Title = method
	}
	return q, append(out, ev)
}

// decisionOptions lists the decisions codex offers for a command that map
// to a host decision. Offers with amendments (objects) have no host
// decision; they stay visible in the request's detail.
func decisionOptions(available []json.RawMessage) []sdk.RequestOption {
	var opts []sdk.RequestOption
	for _, raw := range available {
		var d string
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		switch d {
		case "accept":
			opts = append(opts, sdk.RequestOption{ID: d, Label: "Accept", Kind: "allow_once"})
		case "acceptForSession":
			opts = append(opts, sdk.RequestOption{ID: d, Label: "Accept for this session", Kind: "allow_always"})
		case "decline":
			opts = append(opts, sdk.RequestOption{ID: d, Label: "Decline", Kind: "reject_once"})
		case "cancel":
			opts = append(opts, sdk.RequestOption{ID: d, Label: "Decline and stop the turn", Kind: "reject_once"})
		}
	}
	return opts
}

// approvalDecisions maps host decisions to codex's command and file-change
// approval decisions.
var approvalDecisions = map[sdk.Decision]string{
	sdk.DecisionAccept:           "accept",
	sdk.DecisionAcceptForSession: "acceptForSession",
	sdk.DecisionDecline:          "decline",
	sdk.DecisionCancel:           "cancel",
}

// reply builds the answer to a server request: a result, or a JSON-RPC
// error. A decision that makes no sense for the request is an error for the
// caller, and nothing is sent.
//
//   - command and file-change approvals: {"decision": accept | acceptForSession
//     | decline | cancel};
//   - permissions: accept grants what was asked, for the turn (for the
//     session with accept_for_session); decline and cancel grant nothing
//     ({"permissions":{}});
//   - user input: "answer" (or accept) answers each question with
//     answers[questionId], else answers["answer"]; decline and cancel answer
//     nothing ({"answers":{}});
//   - an MCP tool's approval (an elicitation): {"action": accept (with empty
//     content) | decline | cancel}; codex keeps no accept for the session
//     through this answer, so that decision is refused;
//   - generic: accept or answer replies answers["result"] when it is JSON,
//     else {}; decline and cancel reply a JSON-RPC error.
func reply(q *serverRequest, d sdk.Decision, answers map[string]string) (any, *rpcError, error) {
	switch q.kind {
	case kindCommandApproval, kindFileChangeApproval:
		decision, ok := approvalDecisions[d]
		if !ok {
			return nil, nil, sdk.Errorf(sdk.ErrInvalid, "request %s is an approval; %q is not a decision for it", q.ref, d)
		}
		return decisionResult{Decision: decision}, nil, nil
	case kindPermissions:
		switch d {
		case sdk.DecisionAccept, sdk.DecisionAcceptForSession:
			scope := "turn"
			if d == sdk.DecisionAcceptForSession {
				scope = "session"
			}
			granted := q.params.Permissions
			if len(granted) == 0 || string(granted) == "null" {
				granted = json.RawMessage(`{}`)
			}
			return permissionsResult{Permissions: granted, Scope: scope}, nil, nil
		case sdk.DecisionDecline, sdk.DecisionCancel:
			return permissionsResult{Permissions: json.RawMessage(`{}`)}, nil, nil
		}
		return nil, nil, sdk.Errorf(sdk.ErrInvalid, "request %s asks for permissions; %q is not a decision for it", q.ref, d)
	case kindMCPToolApproval:
		switch d {
		case sdk.DecisionAccept:
			return elicitationResult{Action: "accept", Content: json.RawMessage(`{}`)}, nil, nil
		case sdk.DecisionDecline:
			return elicitationResult{Action: "decline"}, nil, nil
		case sdk.DecisionCancel:
			return elicitationResult{Action: "cancel"}, nil, nil
		}
		return nil, nil, sdk.Errorf(sdk.ErrInvalid, "request %s asks whether an MCP tool may run; %q is not a decision for it", q.ref, d)
	case kindUserInput:
		res := userInputResult{Answers: map[string]userInputAnswer{}}
		switch d {
		case sdk.DecisionAnswer, sdk.DecisionAccept:
			for _, qu := range q.params.Questions {
				text, ok := answers[qu.ID]
				if !ok {
					text, ok = answers["answer"]
				}
				if ok {
					res.Answers[qu.ID] = userInputAnswer{Answers: []string{text}}
				}
			}
			if len(res.Answers) == 0 && len(q.params.Questions) > 0 {
				return nil, nil, sdk.Errorf(sdk.ErrInvalid, "request %s asks %d question(s); the answer has none of their ids (or \"answer\")",
					q.ref, len(q.params.Questions))
			}
			return res, nil, nil
		case sdk.DecisionDecline, sdk.DecisionCancel:
			return res, nil, nil
		}
		return nil, nil, sdk.Errorf(sdk.ErrInvalid, "request %s asks questions; %q is not a decision for it", q.ref, d)
	}
	switch d {
	case sdk.DecisionAccept, sdk.DecisionAcceptForSession, sdk.DecisionAnswer:
		if r, ok := answers["result"]; ok && json.Valid([]byte(r)) {
			return json.RawMessage(r), nil, nil
		}
		return json.RawMessage(`{}`), nil, nil
	case sdk.DecisionDecline, sdk.DecisionCancel:
		return nil, &rpcError{Code: codeDeclined, Message: "declined by the user"}, nil
	}
	return nil, nil, sdk.Errorf(sdk.ErrInvalid, "request %s: unknown decision %q", q.ref, d)
}
