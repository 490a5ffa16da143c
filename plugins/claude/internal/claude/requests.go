package claude

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/baton-run/baton/sdk"
)

// Request kinds, as the host knows them.
const (
	kindCommandApproval    = "command_approval"
	kindFileChangeApproval = "file_change_approval"
	kindPermission         = "permission"
	kindUserInput          = "user_input"
)

// permissionRequest is a can_use_tool request the CLI waits on.
type permissionRequest struct {
	id     string // the CLI's request_id
	kind   sdk.RequestKind
	thread string
	turn   string
	body   controlRequestBody
}

// requestRef names a CLI request for the host.
func requestRef(id string) string { return "req-" + id }

// resolved is the request's request_resolved event: the host's decision,
// or cancel when it can no longer be answered.
func (q *permissionRequest) resolved(d sdk.Decision, text string) sdk.RuntimeEvent {
	return sdk.RuntimeEvent{Kind: sdk.EventRequestResolved, ThreadRef: q.thread, TurnRef: q.turn, RequestRef: requestRef(q.id),
		RequestKind: q.kind, Status: d, Text: text}
}

// permissionOptions are the answers a can_use_tool request takes.
var permissionOptions = []sdk.RequestOption{
	{ID: "allow", Label: "Allow", Kind: "allow_once"},
	{ID: "allow_session", Label: "Allow for this session", Kind: "allow_always"},
	{ID: "deny", Label: "Deny", Kind: "reject_once"},
}

// openRequest normalizes a can_use_tool request into request_opened. A
// request before the CLI named its session has no thread to be asked on:
// q is nil, the event a diagnostic, and the session denies it.
func (n *normalizer) openRequest(id string, body controlRequestBody, raw json.RawMessage) (*permissionRequest, []sdk.RuntimeEvent) {
	if n.root == "" {
		return nil, []sdk.RuntimeEvent{{Kind: sdk.EventDiagnostic, Title: "claude asked about " + body.ToolName +
			" before it named its session; denied", Detail: raw}}
	}
	q := &permissionRequest{id: id, body: body, kind: kindPermission}
	switch toolKind(body.ToolName) {
	case sdk.ItemCommandExecution:
		q.kind = kindCommandApproval
	case sdk.ItemFileChange:
		q.kind = kindFileChangeApproval
	}
	if body.ToolName == "AskUserQuestion" {
		q.kind = kindUserInput
	}
	// The request names its tool use; the tool use names its thread.
	q.thread, q.turn = n.root, n.activeTurn()
	title := body.ToolName
	if it := n.toolItem(body.ToolUseID); it != nil {
		q.thread, q.turn = it.Thread, it.Turn
		title = it.Title
	}
	switch {
	case body.Title != "":
		title = body.Title
	case q.kind == kindCommandApproval || q.kind == kindFileChangeApproval:
	case body.Description != "":
		title = body.ToolName + ": " + body.Description
	}
	ev := sdk.RuntimeEvent{Kind: sdk.EventRequestOpened, ThreadRef: q.thread, TurnRef: q.turn, RequestRef: requestRef(id),
		RequestKind: q.kind, ItemRef: body.ToolUseID, Title: title, Options: permissionOptions, Detail: raw}
	if q.kind == kindUserInput {
		ev.Options = nil
	}
	return q, []sdk.RuntimeEvent{ev}
}

// unboundMessage denies a request the host could not be asked.
const unboundMessage = "Baton could not ask the user about this tool use."

// declinedMessage is what the CLI tells the model when the host declines.
const declinedMessage = "The user declined this tool use."

// reply is the answer to a can_use_tool request for a host decision: allow
// with the tool's input unchanged (for the session: with the CLI's
// suggested rules, kept to the session; for a question: with the answers
// added), or deny.
func reply(q *permissionRequest, d sdk.Decision, answers map[string]string) (any, error) {
	switch d {
	case sdk.DecisionAccept:
		return permissionAllow{Behavior: "allow", UpdatedInput: inputOrEmpty(q.body.Input)}, nil
	case sdk.DecisionAcceptForSession:
		return permissionAllow{Behavior: "allow", UpdatedInput: inputOrEmpty(q.body.Input),
			UpdatedPermissions: sessionScoped(q.body.PermissionSuggestions)}, nil
	case sdk.DecisionDecline:
		return permissionDeny{Behavior: "deny", Message: declinedMessage}, nil
	case sdk.DecisionCancel:
		return permissionDeny{Behavior: "deny", Message: "The user cancelled this tool use and stopped the turn.", Interrupt: true}, nil
	case sdk.DecisionAnswer:
		in := map[string]any{}
		if err := json.Unmarshal(inputOrEmpty(q.body.Input), &in); err != nil {
			return nil, sdk.Errorf(sdk.ErrInvalid, "answer request %s: its input is not an object", requestRef(q.id))
		}
		a := map[string]string{}
		if old, ok := in["answers"].(map[string]any); ok {
			for k, v := range old {
				a[k] = fmt.Sprint(v)
			}
		}
		maps.Copy(a, answers)
		in["answers"] = a
		b, _ := json.Marshal(in)
		return permissionAllow{Behavior: "allow", UpdatedInput: b}, nil
	}
	return nil, sdk.Errorf(sdk.ErrInvalid, "request %s: unknown decision %q", requestRef(q.id), d)
}

// sessionScoped is the CLI's permission suggestions applied to the
// session only: a suggestion's own destination (localSettings,
// userSettings, …) would write the rule into a settings file, in the
// workspace or the user's home. Suggestions that are not objects are left
// out.
func sessionScoped(suggestions []json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for _, raw := range suggestions {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			continue
		}
		m["destination"] = json.RawMessage(`"session"`)
		b, _ := json.Marshal(m)
		out = append(out, b)
	}
	return out
}

func inputOrEmpty(in json.RawMessage) json.RawMessage {
	if len(in) == 0 || string(in) == "null" {
		return json.RawMessage(`{}`)
	}
	return in
}
