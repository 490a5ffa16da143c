// Command mcptool is the small stdio MCP server the MCP tests configure
// through `baton mcp add`: one tool, baton_probe, which appends the text
// it was called with to the file $MCPTOOL_EVIDENCE (the evidence that a
// provider's tool call reached it) and answers "probe: TEXT". It speaks
// MCP's stdio transport: JSON-RPC 2.0, one message a line.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Tool is the one tool's description, as tools/list gives it.
var tool = map[string]any{
	"name":        "baton_probe",
	"description": "Records that it was called, with the text given, and echoes the text.",
	"inputSchema": map[string]any{
		"type":       "object",
		"properties": map[string]any{"text": map[string]any{"type": "string", "description": "any text"}},
		"required":   []string{"text"},
	},
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 64<<10), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var m message
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			fmt.Fprintf(os.Stderr, "mcptool: not JSON-RPC: %v\n", err)
			continue
		}
		if len(m.ID) == 0 {
			continue // a notification (notifications/initialized, cancelled)
		}
		reply := message{JSONRPC: "2.0", ID: m.ID}
		result, err := handle(m)
		if err != nil {
			reply.Error = err
		} else {
			reply.Result = result
		}
		if err := out.Encode(reply); err != nil {
			os.Exit(1)
		}
	}
}

func handle(m message) (any, *rpcError) {
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.ProtocolVersion == "" {
			p.ProtocolVersion = "2025-06-18"
		}
		return map[string]any{"protocolVersion": p.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "mcptool", "version": "1.0.0"}}, nil
	case "ping":
		return map[string]any{}, nil
	case "tools/list":
		return map[string]any{"tools": []any{tool}}, nil
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || p.Name != "baton_probe" {
			return nil, &rpcError{Code: -32602, Message: fmt.Sprintf("unknown tool %q", p.Name)}
		}
		if path := os.Getenv("MCPTOOL_EVIDENCE"); path != "" {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				return nil, &rpcError{Code: -32603, Message: err.Error()}
			}
			fmt.Fprintf(f, "baton_probe %s\n", p.Arguments.Text)
			f.Close()
		}
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "probe: " + p.Arguments.Text}}}, nil
	case "resources/list":
		return map[string]any{"resources": []any{}}, nil
	case "prompts/list":
		return map[string]any{"prompts": []any{}}, nil
	}
	return nil, &rpcError{Code: -32601, Message: "method not found: " + m.Method}
}
