// Package opencode drives `opencode serve` (OpenCode's HTTP server) and
// normalizes its /event stream into Baton runtime events.
//
// The wire facts it relies on were verified against opencode-ai 1.18.33
// (see .notes/opencode-probe.md): the server prints "opencode server
// listening on http://127.0.0.1:PORT" on stdout (and takes --port 0 to mean
// its default port 4096, so the plugin picks a free port itself); /event is
// a text/event-stream of "data: {json}" events, each {"id","type",
// "properties"}, starting with server.connected; prompt_async answers 204
// at once and the turn goes on in events; a turn ends with session.status
// idle and session.idle for its session; text streams as message.part.delta
// events and is then repeated whole in a message.part.updated.
package opencode

import (
	"encoding/json"
	"fmt"
)

// WireProtocol names the protocol in the plugin's description.
const WireProtocol = "opencode-server/1 http+sse"

// event is one /event stream event.
type event struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
	// Raw is the whole event as opencode sent it (a limit's evidence).
	Raw json.RawMessage `json:"-"`
}

// decodeEvent decodes an event's data.
func decodeEvent(data []byte) (event, error) {
	var ev event
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, fmt.Errorf("event is not a JSON object (%w): %s", err, quoteBody(data))
	}
	if ev.Type == "" {
		return ev, fmt.Errorf("event has no type")
	}
	ev.Raw = data
	return ev, nil
}

type sessionInfo struct {
	ID        string `json:"id"`
	ParentID  string `json:"parentID,omitempty"`
	Title     string `json:"title,omitempty"`
	Directory string `json:"directory,omitempty"`
	Version   string `json:"version,omitempty"`
	Revert    *struct {
		MessageID string `json:"messageID"`
	} `json:"revert,omitempty"`
}

type sessionEvent struct {
	SessionID string      `json:"sessionID"`
	Info      sessionInfo `json:"info"`
}

type tokens struct {
	Total     int64 `json:"total"`
	Input     int64 `json:"input"`
	Output    int64 `json:"output"`
	Reasoning int64 `json:"reasoning"`
	Cache     struct {
		Read  int64 `json:"read"`
		Write int64 `json:"write"`
	} `json:"cache"`
}

type errorInfo struct {
	Name string `json:"name"`
	Data struct {
		Message string `json:"message"`
		// An APIError's HTTP answer (opencode 1.18: statusCode,
		// isRetryable, responseHeaders, responseBody), read leniently
		// (see limit.go).
		StatusCode      json.RawMessage `json:"statusCode"`
		ResponseHeaders json.RawMessage `json:"responseHeaders"`
	} `json:"data"`
}

func (e *errorInfo) message() string {
	if e.Data.Message != "" {
		return e.Data.Message
	}
	return e.Name
}

type messageInfo struct {
	ID        string     `json:"id"`
	SessionID string     `json:"sessionID"`
	Role      string     `json:"role"`
	ParentID  string     `json:"parentID,omitempty"`
	Error     *errorInfo `json:"error,omitempty"`
	// ModelID and ProviderID name an assistant message's model.
	ModelID    string `json:"modelID,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
}

type messageEvent struct {
	SessionID string      `json:"sessionID"`
	Info      messageInfo `json:"info"`
}

type toolState struct {
	Status   string          `json:"status"`
	Input    json.RawMessage `json:"input,omitempty"`
	Output   string          `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	Title    string          `json:"title,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

type part struct {
	ID        string     `json:"id"`
	SessionID string     `json:"sessionID"`
	MessageID string     `json:"messageID"`
	Type      string     `json:"type"`
	Text      string     `json:"text,omitempty"`
	Synthetic bool       `json:"synthetic,omitempty"`
	Tool      string     `json:"tool,omitempty"`
	CallID    string     `json:"callID,omitempty"`
	State     *toolState `json:"state,omitempty"`
	Tokens    *tokens    `json:"tokens,omitempty"`
	Cost      float64    `json:"cost,omitempty"` // a step-finish's, in US dollars
	Time      *struct {
		Start int64 `json:"start"`
		End   int64 `json:"end"`
	} `json:"time,omitempty"`
}

type partEvent struct {
	SessionID string `json:"sessionID"`
	Part      part   `json:"part"`
}

type deltaEvent struct {
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	PartID    string `json:"partID"`
	Field     string `json:"field"`
	Delta     string `json:"delta"`
}

type statusEvent struct {
	SessionID string `json:"sessionID"`
	Status    struct {
		Type    string `json:"type"`
		Message string `json:"message,omitempty"`
		Attempt int    `json:"attempt,omitempty"`
		// Next is when opencode calls the model again (Unix ms), read
		// leniently (see limit.go).
		Next json.RawMessage `json:"next,omitempty"`
	} `json:"status"`
}

type idleEvent struct {
	SessionID string `json:"sessionID"`
}

type sessionErrorEvent struct {
	SessionID string     `json:"sessionID,omitempty"`
	Error     *errorInfo `json:"error,omitempty"`
}

type permissionAsked struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"sessionID"`
	Permission string          `json:"permission"`
	Patterns   []string        `json:"patterns"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	Always     []string        `json:"always,omitempty"`
	Tool       *struct {
		MessageID string `json:"messageID"`
		CallID    string `json:"callID"`
	} `json:"tool,omitempty"`
}

type permissionReplied struct {
	SessionID string `json:"sessionID"`
	RequestID string `json:"requestID"`
	Reply     string `json:"reply"`
}

// Requests the plugin sends.

type textPartInput struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type modelRef struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
}

type promptBody struct {
	Parts []textPartInput `json:"parts"`
	Model *modelRef       `json:"model,omitempty"`
}

type revertBody struct {
	MessageID string `json:"messageID"`
}

type permissionReply struct {
	Reply string `json:"reply"`
}

type health struct {
	Healthy bool   `json:"healthy"`
	Version string `json:"version"`
}

// messageWithParts is an entry of GET /session/{id}/message.
type messageWithParts struct {
	Info messageInfo `json:"info"`
}
